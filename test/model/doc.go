// Package model holds Concord's model-based security test: random
// sequences of actions by several users and a bot (joins, leaves, role
// grants, role and overwrite edits, sends, replies, nonce retries, edits,
// deletes, bulk deletes, pins, typing, history and channel reads, DMs and
// group DMs, gateway reconnects, dropped connections and resumes) run
// against a real in-process
// server over real HTTP and gateway WebSocket clients, checked against a
// reference model of who may see what at each moment. It also holds the
// regression tests of the visibility findings of the security review (nonce replay,
// DMs without a shared guild, ...).
//
// The tests are in _test.go files; `go test ./test/model/` runs them,
// -model.checks=N sets how many sequences the model test runs.
package model
