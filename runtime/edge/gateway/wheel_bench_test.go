package gateway

import (
	"fmt"
	"net"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/domain/event"
)

// cpuTime returns the process's user+system CPU time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkIdle10k measures the process CPU of 10,000 idle sessions'
// timers, one wall second per iteration, reported as % of one core:
//
//   - heartbeat/*: attached sessions heartbeating at Discord's interval
//     (41.25 s, so 242 heartbeats/s spread evenly by one driver goroutine
//     waking every 10 ms). baseline is the driver alone (a heartbeat is an
//     atomic store and nothing else); timer-per-session resets one runtime
//     timer per heartbeat, which is what SetReadDeadline on each socket did
//     before (the netpoller keeps a runtime timer per deadline); wheel is
//     the node's code: the store plus conn.checkDeadline on the wheel.
//   - detached/*: sessions waiting out their resume window (2 min, none
//     ends during the run): a time.AfterFunc each (before) or the node's
//     wheel (session.startWindowLocked).
//
// Record with -benchtime=10x (ten seconds per row).
func BenchmarkIdle10k(b *testing.B) {
	modes := []string{"heartbeat/baseline", "heartbeat/timer-per-session", "heartbeat/wheel", "detached/afterfunc", "detached/wheel"}
	for _, mode := range modes {
		b.Run(mode, func(b *testing.B) {
			node, err := NewNode(Config{Node: testNode}, newFakeBackend())
			if err != nil {
				b.Fatal(err)
			}
			defer node.wheel.close()
			zombie := node.cfg.ZombieTimeout
			var touch func(i int, now time.Time)
			var stamps [idleSessions]atomic.Int64
			switch mode {
			case "heartbeat/baseline":
				touch = func(i int, now time.Time) { stamps[i].Store(now.UnixNano()) }
			case "heartbeat/timer-per-session":
				timers := make([]*time.Timer, idleSessions)
				for i := range timers {
					timers[i] = time.AfterFunc(zombie, func() {})
				}
				defer func() {
					for _, t := range timers {
						t.Stop()
					}
				}()
				touch = func(i int, now time.Time) {
					stamps[i].Store(now.UnixNano())
					timers[i].Reset(zombie)
				}
			case "heartbeat/wheel":
				conns := make([]*conn, idleSessions)
				for i := range conns {
					c := newConn(node, nil, 10, compressNone, "")
					c.identified.Store(true)
					// Steady state: the round robin below reaches c after
					// i/n of an interval, so its last heartbeat was that
					// much less than an interval ago, and its check is due
					// anywhere in the next ZombieTimeout (when it fires
					// early it re-arms, the steady-state work).
					c.lastHeartbeat.Store(time.Now().Add(-DefaultHeartbeatInterval * time.Duration(idleSessions-i) / idleSessions).UnixNano())
					node.wheel.arm(&c.deadline, zombie*time.Duration(i+1)/idleSessions, c.checkDeadline, 0)
					conns[i] = c
				}
				touch = func(i int, now time.Time) { conns[i].lastHeartbeat.Store(now.UnixNano()) }
			case "detached/afterfunc":
				timers := make([]*time.Timer, idleSessions)
				for i := range timers {
					timers[i] = time.AfterFunc(node.cfg.ReplayMaxAge, func() {})
				}
				defer func() {
					for _, t := range timers {
						t.Stop()
					}
				}()
			case "detached/wheel":
				for i := range idleSessions {
					s := &session{node: node, info: event.Session{ID: event.SessionID(fmt.Sprintf("%032x", i))}}
					s.mu.Lock()
					s.startWindowLocked()
					s.mu.Unlock()
				}
			}
			runtime.GC()
			b.ResetTimer()
			cpu0, wall0 := cpuTime(b), time.Now()
			next := 0 // next session to heartbeat, round robin
			beats := 0.0
			for range b.N {
				end := time.Now().Add(time.Second)
				if touch == nil {
					time.Sleep(time.Until(end)) // the measured interval: nothing but timers runs
					continue
				}
				tick := time.NewTicker(10 * time.Millisecond)
				for now := range tick.C {
					if !now.Before(end) {
						break
					}
					// Heartbeats due in 10 ms at one per session per interval.
					beats += float64(idleSessions) * float64(10*time.Millisecond) / float64(DefaultHeartbeatInterval)
					for ; beats >= 1; beats-- {
						touch(next, now)
						next = (next + 1) % idleSessions
					}
				}
				tick.Stop()
			}
			cpu, wall := cpuTime(b)-cpu0, time.Since(wall0)
			b.StopTimer()
			b.ReportMetric(100*float64(cpu)/float64(wall), "%core")
			b.ReportMetric(float64(cpu.Microseconds())/wall.Seconds(), "cpu-µs/s")
		})
	}
}

// BenchmarkHeartbeatDeadline is one heartbeat's deadline work: a socket
// read deadline moved (before) against the atomic store the wheel's
// liveness check reads (now).
func BenchmarkHeartbeatDeadline(b *testing.B) {
	b.Run("set-read-deadline", func(b *testing.B) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		defer ln.Close()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		b.ReportAllocs()
		for range b.N {
			_ = c.SetReadDeadline(time.Now().Add(DefaultHeartbeatInterval * 3 / 2))
		}
	})
	b.Run("wheel", func(b *testing.B) {
		var last atomic.Int64
		b.ReportAllocs()
		for range b.N {
			last.Store(time.Now().UnixNano())
		}
	})
}

// BenchmarkResumeWindow is one detach and re-attach of a session's resume
// window with 10,000 other windows pending: time.AfterFunc and Stop
// (before) against arming and stopping a wheel entry (now).
func BenchmarkResumeWindow(b *testing.B) {
	b.Run("afterfunc", func(b *testing.B) {
		others := make([]*time.Timer, idleSessions)
		for i := range others {
			others[i] = time.AfterFunc(time.Hour, func() {})
		}
		defer func() {
			for _, t := range others {
				t.Stop()
			}
		}()
		var gen uint64
		expire := func(uint64) {}
		b.ReportAllocs()
		for range b.N {
			gen++
			g := gen
			t := time.AfterFunc(DefaultReplayMaxAge, func() { expire(g) })
			t.Stop()
		}
	})
	b.Run("wheel", func(b *testing.B) {
		w := newWheel(wheelTickMax, time.Now)
		defer w.close()
		others := make([]wheelEntry, idleSessions)
		fn := func(uint64) {}
		for i := range others {
			w.arm(&others[i], time.Hour, fn, 0)
		}
		var e wheelEntry
		var gen uint64
		b.ReportAllocs()
		for range b.N {
			gen++
			w.arm(&e, DefaultReplayMaxAge, fn, gen)
			w.stop(&e)
		}
	})
}
