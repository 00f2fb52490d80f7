//go:build faults

package faults

import (
	"fmt"
	"os/exec"
	"sync"
	"syscall"

	"github.com/concord-chat/concord/internal/logbuf"
)

// child is a server process of the run that the nemesis kills and
// starts again (an etcd member, the live roles' Redis): its current
// command, a channel closed when that command exits, and the output of
// every start.
type child struct {
	name string
	argv []string // the binary, then its arguments

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	logs logbuf.Buffer
}

// run starts argv once more; exited reports when it ends.
func (c *child) run() error {
	cmd := exec.Command(c.argv[0], c.argv[1:]...)
	cmd.Stdout, cmd.Stderr = &c.logs, &c.logs
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", c.name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	c.mu.Lock()
	c.cmd, c.done = cmd, done
	c.mu.Unlock()
	return nil
}

// exited is closed when the command last started exits.
func (c *child) exited() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.done
}

// pid is the running command's process id, 0 once it exited.
func (c *child) pid() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.done:
		return 0
	default:
		return c.cmd.Process.Pid
	}
}

// kill kills the running command with SIGKILL (continuing it first, in
// case a pause fault stopped it) and waits until it exited.
func (c *child) kill() error {
	c.mu.Lock()
	cmd, done := c.cmd, c.done
	c.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGCONT)
	_ = cmd.Process.Kill()
	<-done
	return nil
}
