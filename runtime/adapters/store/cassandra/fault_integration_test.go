//go:build integration

package cassandra_test

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// proxy forwards TCP connections to a target until cut.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	down   bool
}

func startProxy(t *testing.T, target string) *proxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			down := p.down
			p.mu.Unlock()
			if down {
				c.Close()
				continue
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { io.Copy(u, c); u.Close() }()
			go func() { io.Copy(c, u); c.Close() }()
		}
	}()
	return p
}

// cut closes every connection and refuses new ones.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *proxy) restore() { p.mu.Lock(); p.down = false; p.mu.Unlock() }

// TestCassandraDownMidTraffic: when the cluster goes away, writes fail
// with store.ErrUnavailable (the API's 503) — never nil for a message that
// was not written — and the store recovers when it comes back.
func TestCassandraDownMidTraffic(t *testing.T) {
	addr := server(t)
	ks := sharedKeyspace(t, addr)
	newTestStore(t, testConfig(addr, ks)).Close() // schema, with patient timeouts
	p := startProxy(t, addr)
	cfg := testConfig(p.ln.Addr().String(), ks)
	cfg.Timeout = 2 * time.Second
	cfg.ConnectTimeout = 2 * time.Second
	s := newTestStore(t, cfg)
	defer s.Close()
	ctx := context.Background()
	ch := snowflake.ID(time.Now().UnixNano())
	id := func(i int) snowflake.ID { return snowflake.FromTime(time.Now()) | snowflake.ID(i) }
	if err := s.PutMessage(ctx, store.Message{ID: id(1), ChannelID: ch}); err != nil {
		t.Fatal(err)
	}
	p.cut()
	lost := store.Message{ID: id(2), ChannelID: ch, Content: "never acknowledged"}
	err := s.PutMessage(ctx, lost)
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("PutMessage with the cluster gone: %v, want store.ErrUnavailable", err)
	}
	if _, err := s.ListMessages(ctx, ch, store.HistoryQuery{}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("ListMessages with the cluster gone: %v, want store.ErrUnavailable", err)
	}
	if err := s.Ping(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Ping with the cluster gone: %v", err)
	}
	p.restore()
	deadline := time.Now().Add(time.Minute)
	for {
		err := s.PutMessage(ctx, store.Message{ID: id(3), ChannelID: ch})
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrUnavailable) || time.Now().After(deadline) {
			t.Fatalf("PutMessage after the cluster came back: %v", err)
		}
		time.Sleep(200 * time.Millisecond) // the driver reconnects in the background
	}
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping after recovery: %v", err)
	}
}
