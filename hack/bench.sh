#!/usr/bin/env bash
# Runs the benchmarks recorded in docs/benchmarks.md that need no external
# server, printing each command before its output. The real-server ones
# (Cassandra, Kafka) are listed in docs/benchmarks.md with their commands.
set -euo pipefail
cd "$(dirname "$0")/.."
run() { printf '\n==> %s\n' "$*"; "$@"; }
run go test ./runtime/base/snowflake -run '^$' -bench BenchmarkNext -benchtime 1s
run go test ./runtime/domain/permissions -run '^$' -bench . -benchtime 1s
run go test ./runtime/adapters/store/pebble -run '^$' -bench BenchmarkHistory -benchmem -benchtime 1s
run go test ./runtime/domain/guild -run '^$' -bench 'Fanout|AuthorizeSend' -benchtime=2000x
run go test ./runtime/edge/api -run '^$' -bench . -benchtime=1000x
run go test ./runtime/services/transport -run '^$' -bench Deliver -benchtime=2s
run go test ./runtime/domain/readstate -run XXX -bench 'Ack|Everyone' -benchtime 2s
run go run ./test/load/cmd/fanout -n 1000,10000
