// Package live tests the live-comment roles as real `concord serve`
// processes on Kafka, Redis, Cassandra and etcd (build tag integration).
package live
