#!/usr/bin/env bash
# test.sh — start (or reuse) the loopback Kafka and run the event-log and
# read-state tests that need it: the eventlog conformance suite on Kafka,
# the read-state kill and rebalance tests on Kafka, plus the embedded runs.
# (runtime/domain/readstate/cassandra needs CONCORD_CASSANDRA and runs with the
# Cassandra tests.)
# Extra arguments go to `go test` (e.g. -run, -bench, -v).
set -euo pipefail
cd "$(dirname "$0")/../.."

hack/kafka/kafka.sh start
export CONCORD_KAFKA="${CONCORD_KAFKA:-$(hack/kafka/kafka.sh addr)}"
echo "[kafka] running integration tests against $CONCORD_KAFKA" >&2
go test -tags integration -count=1 "$@" \
	./runtime/adapters/eventlog/... ./runtime/domain/readstate ./runtime/domain/readstate/pebble
