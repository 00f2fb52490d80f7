package registry

import "context"

// Claimer is an optional ability of a Registry: holding a key exclusively
// for as long as the process lives, as a node holds its name. Concord
// nodes claim their snowflake worker/process pair with it.
//
// Claim writes value under key (in the same space as Put, Get and List)
// bound to the Registry's lease when no live process holds key, and fails
// with ErrExists otherwise. The claim ends with Delete(key), or within
// the lease TTL after the process dies or closes the Registry.
//
// The returned channel is closed when the claim is lost: the lease
// expired (a partition longer than the TTL) and another process had
// claimed key before this one could renew it. The holder must then stop
// using what it claimed.
type Claimer interface {
	Claim(ctx context.Context, key string, value []byte) (lost <-chan struct{}, err error)
}
