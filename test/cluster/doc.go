// Package cluster tests Concord as a cluster of real processes: `concord
// serve` nodes with separate roles on loopback, an embedded etcd in the
// test process as the registry and a real Cassandra as the shared store
// (CONCORD_CASSANDRA). Run it with
//
//	go test -tags integration ./test/cluster/
package cluster
