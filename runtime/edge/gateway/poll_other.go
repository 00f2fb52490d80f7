//go:build !linux

package gateway

// poller is Linux-only; elsewhere every connection is read by its own
// goroutine.
type poller struct{}

func newPoller() (*poller, error) { return nil, nil }
func (p *poller) add(*conn) bool  { return false }
func (p *poller) remove(*conn)    {}
func (p *poller) close()          {}
