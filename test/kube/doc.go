// Package kube is the end-to-end suite on a real Kubernetes node: the
// single-node cluster hack/node/up.sh starts (`make cluster-up`), where a
// kubelet runs the operator's pods from scratch images of the concord and
// concord-operator binaries, against the tests' Cassandra and Redis and a
// Kafka and an etcd outside the cluster.
//
// The suite (build tag e2e, `make test-e2e`) installs charts/concord with
// Helm's Go library as a platform team would, applies a ConcordCluster, a
// GatewayPool, a VoiceRegion and the live roles built from the documented
// examples in config/samples (only what this node cannot honour is changed:
// images, backends, sizes and node pools), waits until every pod is Ready and
// every condition True, and then drives clients through the GatewayPool's
// Service: a raw gateway client, and scenarios that move pods under them.
//
// Clients reach the platform the way they would through an ingress: a
// router in the test process sends WebSocket upgrades to the GatewayPool's
// Service and everything else to the api Service, both by their ClusterIPs
// (the host routes the Service range to the node).
package kube
