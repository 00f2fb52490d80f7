// Package load measures Concord's gateway fan-out against a peer in the
// same run: one event to N sessions on one gateway node over real loopback
// WebSockets, and the same payload broadcast by github.com/centrifugal/
// centrifuge to the same number of clients.
//
// The servers run in the measuring process; the clients run in a child
// process (the same binary, re-executed), so the server CPU per delivery —
// process CPU time from getrusage divided by deliveries — counts server
// work only (including the kernel's loopback TCP work done in the server's
// send calls). Each client records send→receive latency from a timestamp
// in the payload; both processes read the same wall clock.
//
// Run it as
//
//	go test ./test/load -run XXX -bench BenchmarkFanout -benchtime=1x [-fanout.n=1000,10000,50000]
//	go run ./test/load/cmd/fanout -n 1000,10000,50000
package load
