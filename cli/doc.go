// Package cli is kubectl-concord, the kubectl plugin of Concord: it shows
// guilds (placement, node, members and online, relays, event age, queue,
// voice calls), gateway pools and voice regions, drains gateway pods and
// places guilds on dedicated nodes. Live runtime statistics come from the API
// role's admin endpoint through the Kubernetes service proxy (so kubeconfig
// credentials are all it needs); everything else comes from custom resource
// status. Each subcommand is an Options value with Complete, Validate and Run.
package cli
