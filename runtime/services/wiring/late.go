package wiring

import "sync/atomic"

// Late is a value a role sets after the roles that hold it were built:
// a consumer built before its provider (the guild role of `concord dev`,
// whose events go to the gateway built after it) holds the Late and
// reads it when it is used, by which time the provider has set it. The
// zero value holds nothing; it is safe for concurrent use.
type Late[T any] struct {
	p atomic.Pointer[T]
}

// Set sets the value; a later Set replaces it.
func (l *Late[T]) Set(v T) { l.p.Store(&v) }

// Get returns the value, and whether one was set.
func (l *Late[T]) Get() (T, bool) {
	if p := l.p.Load(); p != nil {
		return *p, true
	}
	var zero T
	return zero, false
}

// LateOf returns the process's Late for seam k: one per process
// whichever roles ask for it, created the first time. A nil *Seams
// returns a fresh one each time.
func LateOf[T any](s *Seams, k Key[T]) *Late[T] {
	l, _ := Shared(s, Key[*Late[T]]{Name: "late/" + k.Name}, func() (*Late[T], func() error, error) {
		return &Late[T]{}, nil, nil
	})
	return l
}
