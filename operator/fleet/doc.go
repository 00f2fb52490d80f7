// Package fleet holds the ports through which Concord's controllers and
// autoscaler reach the running fleet outside the Kubernetes API: the registry
// (etcd: pins, relay lists, draining marks, guild ownership), the pods' admin
// endpoints (drain, session counts, voice load) and the guild nodes' per-guild
// statistics. Adapters: Memory (tests, dry runs) and package podadmin (HTTP).
package fleet
