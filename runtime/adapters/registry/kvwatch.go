package registry

import "context"

// KVChange is one key of the kv space (Put, Get, List, Delete) as a
// KVWatcher reports it. Key is the key as given to Put.
type KVChange struct {
	Key string
	// Value is the key's value; nil when Deleted.
	Value []byte
	// Deleted is set when the key was removed.
	Deleted bool
}

// KVUpdate is what a KVWatcher sends: a full listing of the prefix, the
// changes since the previous update, or the news that the watch lost its
// connection.
type KVUpdate struct {
	// Snapshot means Changes lists every key under the prefix (none
	// Deleted): sent first and again after every Lost.
	Snapshot bool
	// Lost means the watch cannot follow the registry for now (connection
	// or leader lost, history compacted): changes may be missed until the
	// next Snapshot. Changes is empty.
	Lost bool
	// Changes are in the order the registry applied them.
	Changes []KVChange
	// Revision is the registry's revision of this update (0 when Lost).
	Revision int64
}

// KVWatcher is the optional ability of a Registry to follow a prefix of
// its kv space (runtime/domain/entitlement pushes revocations through it).
//
// Delivery: WatchKV sends a Snapshot at once, then every change in order.
// A Lost update is sent when the watch breaks; the implementation keeps
// retrying and sends a new Snapshot when it follows again, so a reader
// that compares the Snapshot with what it saw learns what it missed.
// Updates are not conflated: a reader that stops reading stalls its own
// watch only. The channel is closed when ctx ends or the Registry closes.
type KVWatcher interface {
	WatchKV(ctx context.Context, prefix string) (<-chan KVUpdate, error)
}
