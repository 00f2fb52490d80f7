package wiring

import "errors"

// Closers collects what a role opened so it closes in reverse order of
// opening, once: on a failed build, or with the role's seam. The zero
// value is ready to use; it is not safe for concurrent use.
type Closers struct {
	fns []func() error
}

// Add records f to run at Close.
func (c *Closers) Add(f func() error) { c.fns = append(c.fns, f) }

// Close runs what Add recorded, last first, and forgets it; the errors
// are joined.
func (c *Closers) Close() error {
	fns := c.fns
	c.fns = nil
	var errs []error
	for i := len(fns) - 1; i >= 0; i-- {
		errs = append(errs, fns[i]())
	}
	return errors.Join(errs...)
}
