package dataservice

import (
	"errors"
	"fmt"

	"github.com/concord-chat/concord/runtime/adapters/store"
)

// Errors of the data service. Both wrap store.ErrUnavailable: the request
// may succeed on another instance, and the API answers 503 if it never
// does.
var (
	// ErrClosed is returned by a Service that was closed, also to the
	// requests that were waiting on it.
	ErrClosed = fmt.Errorf("dataservice: instance closed: %w", store.ErrUnavailable)
	// ErrNoInstance means the ring holds no data instance.
	ErrNoInstance = fmt.Errorf("dataservice: no data instance on the ring: %w", store.ErrUnavailable)
)

// IsRetryable reports whether err means "this instance could not serve
// the request; another may": the instance closed or the store was
// unavailable.
func IsRetryable(err error) bool {
	return errors.Is(err, ErrClosed) || errors.Is(err, store.ErrUnavailable)
}
