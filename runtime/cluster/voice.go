package cluster

import "github.com/concord-chat/concord/runtime/voicerole"

// storeless reports whether a node runs only roles that keep nothing in
// the chat store (voice): it needs no shared store.
func storeless(c Config) bool {
	for _, r := range c.Roles {
		if r != voicerole.Name {
			return false
		}
	}
	return len(c.Roles) > 0
}
