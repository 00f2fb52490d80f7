// Package rest holds what Concord's Discord-shaped REST handlers (runtime/edge/api
// and runtime/domain/bots) share: the Discord error body and its HTTP status, the
// table that translates domain errors into it, the JSON writer, and the
// bounded request body reader.
//
// Each handler package keeps its own error table and its own JSON decoding
// rules; this package only carries them out, so that the shapes Discord
// clients parse are written in one place.
package rest
