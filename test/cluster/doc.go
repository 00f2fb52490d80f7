// Package cluster tests Concord as a cluster of real processes: `concord
// serve` nodes with separate roles on loopback, an embedded etcd in the
// test process as the registry and a real Cassandra as the shared store
// (CONCORD_CASSANDRA). Run it with
//
//	go test -tags integration ./test/cluster/
//
// Three heavier tests have build tags of their own: TestReconnectStorm
// (storm), TestRunCluster (runcluster) and TestChaos (chaos: the whole
// topology on three etcd members and a private Redis, one replica of
// each role killed in turn under traffic; `make test` runs it alone
// after the other packages).
package cluster
