package cassandra

import (
	"errors"

	"github.com/concord-chat/concord/runtime/adapters/store"
)

// Errors of this package, returned wrapped. Store errors callers branch on
// are the store package's: store.ErrNotFound, store.ErrExists,
// store.ErrUnavailable.
var (
	// ErrConfig is returned for an invalid Config or URL.
	ErrConfig = errors.New("cassandra store: invalid config")
	// ErrWidth is returned by SetBucketWidth for a width change the layout
	// cannot take.
	ErrWidth = errors.New("cassandra store: invalid bucket width change")
)

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }
