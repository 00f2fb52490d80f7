// Package faults is Concord's durability suite under faults (issue 28):
// clients run against `concord serve` split over processes
// (internal/topology) on a three-node Cassandra (rf=3, LOCAL_QUORUM) and
// three Kafka brokers (replication 3, min.insync.replicas 2, acks=all)
// that hack/replicated.sh starts, while a nemesis driven by a printed
// seed kills and restarts processes, partitions the network between this
// machine's loopback test hosts with iptables rules, pauses processes
// with SIGSTOP, skews a Cassandra node's clock with libfaketime, moves the
// guild owner's wall clock 45 s ahead or behind through Concord's clock
// seam (--fault-clock-file, runtime/base/clock), cuts the Concord nodes
// off from Redis and kills a gateway node; the
// history the clients recorded is then judged by package history
// (porcupine for per-channel linearizability, and direct checks).
//
// The tests carry the build tag faults and need root (iptables, cgroups):
//
//	bash hack/replicated.sh start && . ~/.cache/concord/replicated/env.sh
//	. ~/.cache/concord/test-env.sh
//	go test -tags faults -count=1 -timeout 30m -v ./test/faults/
//
// `make test-faults` does this with the full schedule; `make test` runs
// the short one (one partition, one replica loss). CONCORD_FAULTS_SEED
// replays a schedule, CONCORD_FAULTS_SCHEDULE=short|clients|clock|full picks
// one (clients: the Redis cut and the gateway kill alone; clock: the guild
// owner's clock 45 s ahead, then 45 s behind).
package faults
