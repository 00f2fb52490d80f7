// Package dev tests `concord dev`: every role of the role tables in one
// process, opened through app.Open as the command opens it, on embedded
// backends (Pebble, the in-process event log and counters) or, with
// -tags integration, on the real Cassandra, Kafka and Redis of
// `. ~/.cache/concord/test-env.sh`. The tests drive it as clients do —
// REST, the gateway's WebSocket — and reach the node's parts through
// app.Node's accessors.
package dev
