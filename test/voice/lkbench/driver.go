//go:build livekit

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pion/rtp"
	"github.com/pion/webrtc/v4"
)

// peer is one joined benchmark client.
type peer interface {
	// Send sends one RTP packet on the client's microphone track.
	Send(p *rtp.Packet) error
	Close()
}

// joiner connects clients to one server kind.
type joiner interface {
	Join(ctx context.Context, p part, rx *receiver) (peer, error)
}

// receiver counts what one client receives: packets, and tracks that
// delivered at least one.
type receiver struct {
	got   atomic.Int64
	heard atomic.Int32
}

// read counts a remote track's packets until it ends, into one reused
// buffer (no allocation per packet on the driver's side; the SRTP
// decryption inside pion stays).
func (rx *receiver) read(tr *webrtc.TrackRemote) {
	buf := make([]byte, 1500)
	first := true
	for {
		if _, _, err := tr.Read(buf); err != nil {
			return
		}
		if first {
			rx.heard.Add(1)
			first = false
		}
		rx.got.Add(1)
	}
}

// drive is a driver process: it joins its share of the clients, sends
// every 20 ms on its speakers, prints "ready H W" once every client heard
// every track it expects (H of W tracks open), answers "mark" on stdin with "count N M" (packets
// received so far, and packets its speakers sent times the clients each
// one is for) and leaves when stdin closes.
func drive(args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("usage: drive SPEC.json")
	}
	b, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	var spec driverSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		return err
	}
	var j joiner
	switch spec.Target.Kind {
	case "concord":
		j, err = newConcordJoiner(spec.Target.Concord)
	case "livekit":
		j = newLKJoiner(spec.Target.LiveKitURL)
	default:
		err = fmt.Errorf("unknown target %q", spec.Target.Kind)
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rxs := make([]*receiver, len(spec.Parts))
	peers := make([]peer, len(spec.Parts))
	defer func() {
		var wg sync.WaitGroup
		for _, p := range peers {
			if p != nil {
				wg.Go(p.Close)
			}
		}
		wg.Wait()
	}()
	// Join with bounded concurrency; a failure ends the run.
	sem := make(chan struct{}, max(spec.Joiners, 1))
	errs := make(chan error, len(spec.Parts))
	var wg sync.WaitGroup
	for i, p := range spec.Parts {
		rxs[i] = &receiver{}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			// A loaded machine times some joins out: up to three
			// attempts, the same for both servers.
			var pe peer
			var err error
			for range 3 {
				jctx, jcancel := context.WithTimeout(ctx, 90*time.Second)
				pe, err = j.Join(jctx, p, rxs[i])
				jcancel()
				if err == nil {
					break
				}
			}
			if err != nil {
				errs <- fmt.Errorf("participant %d (room %d): %w", p.ID, p.Room, err)
				return
			}
			peers[i] = pe
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		fmt.Println("fail", err)
		return err
	}
	stop := make(chan struct{})
	defer close(stop)
	var sent atomic.Int64
	go speak(spec.Parts, peers, &sent, stop)
	// Ready once every expected track delivered a packet, or after 120 s
	// with what is open (an overloaded server may never open some; the
	// parent reports how many were).
	deadline := time.Now().Add(120 * time.Second)
	for {
		heard, want := 0, 0
		for i, p := range spec.Parts {
			want += p.Expect
			heard += min(int(rxs[i].heard.Load()), p.Expect)
		}
		if heard == want || time.Now().After(deadline) {
			fmt.Println("ready", heard, want)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if sc.Text() == "mark" {
			var n int64
			for _, rx := range rxs {
				n += rx.got.Load()
			}
			fmt.Println("count", n, sent.Load()*int64(spec.Fanout))
		}
	}
	return nil
}

// speak sends one 120-byte Opus-sized packet every 20 ms on every
// speaker, from one ticker for the whole process.
// It counts the packets sent: a starved driver process sends fewer than
// 50 per second, and the servers then have less to forward.
func speak(parts []part, peers []peer, sent *atomic.Int64, stop chan struct{}) {
	var mics []peer
	for i, p := range parts {
		if p.Speaker {
			mics = append(mics, peers[i])
		}
	}
	if len(mics) == 0 {
		return
	}
	pkt := &rtp.Packet{Header: rtp.Header{Version: 2, PayloadType: 111, SSRC: 0x1234}, Payload: make([]byte, 120)}
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		pkt.SequenceNumber++
		pkt.Timestamp += 960
		for _, m := range mics {
			if m.Send(pkt) == nil {
				sent.Add(1)
			}
		}
	}
}
