// Package wire holds Discord's JSON shapes as Concord serves them over REST
// and the gateway, and the conversions from store value types.
//
// Everything here follows the rules that keep discordgo, discord.js and
// discord.py decoding: ids and permission bits are JSON strings, flags are
// integers, arrays are never null and timestamps carry "+00:00" with six
// fraction digits.
package wire
