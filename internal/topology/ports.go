package topology

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// portBook hands out loopback ports for nodes that bind them later, and
// keeps each one handed out until it is released, across every process of
// the machine that uses a book on the same directory.
//
// Probing a port (listen, close) only says nobody has bound it yet: a
// node started a moment ago may not have bound the port it was given, and
// two nodes given the same port leave one of them exiting with "address
// already in use" (CI saw a cluster's api-2 handed data-1's port, with
// its readiness probe answered by data-1). So a port is also locked: an
// flock(2) on a file named for it, held while the port is in use. Other
// test processes starting clusters at the same time skip it, and the
// kernel drops the lock when the holder exits, even by SIGKILL, so a
// crashed test leaves nothing to clean.
type portBook struct {
	dir    string
	lo, hi int // the range, [lo, hi)
	// free probes whether nobody has the port bound now.
	free func(port int) bool

	mu   sync.Mutex
	held map[string]*os.File // by host:port
}

// ports is the test process's book. Ports are the machine's, not a
// cluster's: every cluster the process starts takes from the same book.
//
// The range lies below the kernel's ephemeral range (32768 and up on
// Linux): the nodes bind their gRPC listeners on "127.0.0.1:0", and a
// port from the ephemeral range could be taken by one of those meanwhile.
// test/cluster's run-cluster test keeps its ports below it.
var ports = &portBook{
	dir:  filepath.Join(os.TempDir(), "concord-topology-ports"),
	lo:   20000,
	hi:   32000,
	free: probeFree,
	held: map[string]*os.File{},
}

func probeFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// take returns a loopback address whose port is locked for the caller
// until release.
func (b *portBook) take() (string, error) {
	if err := os.MkdirAll(b.dir, 0o700); err != nil {
		return "", fmt.Errorf("topology: port locks: %w", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.hi - b.lo
	start := rand.IntN(n)
	for i := range n {
		port := b.lo + (start+i)%n
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if _, ok := b.held[addr]; ok {
			continue
		}
		f, err := b.lock(port)
		if err != nil {
			return "", err
		}
		if f == nil {
			continue // another process has it
		}
		if !b.free(port) {
			f.Close()
			continue
		}
		b.held[addr] = f
		return addr, nil
	}
	return "", fmt.Errorf("topology: no free loopback port in %d-%d", b.lo, b.hi-1)
}

// lock takes port's lock without waiting: nil, nil when another holder
// has it.
func (b *portBook) lock(port int) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(b.dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("topology: port lock: %w", err)
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		f.Close()
		return nil, nil
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("topology: port lock %d: %w", port, err)
	}
	return f, nil
}

// release gives addr's port back; addresses the book did not hand out
// are ignored.
func (b *portBook) release(addr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if f, ok := b.held[addr]; ok {
		f.Close() // closing the last descriptor drops the flock
		delete(b.held, addr)
	}
}
