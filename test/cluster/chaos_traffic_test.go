//go:build integration && chaos

package cluster

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// chaosTraffic is the steady load of the chaos test, as real clients
// behind a load balancer make it: writers posting with nonces and
// enforce_nonce, each request to the next api node and, when one fails
// (a killed node, a 5xx), retried with the same nonce on the other, so
// the retry is answered with the message already written; ackers
// acknowledging the newest message of a channel; a presence ticker
// changing one user's status through its gateway session.
type chaosTraffic struct {
	apis   []string // api nodes' HTTP addresses
	client *http.Client

	mu       sync.Mutex
	acks     []chaosAck     // messages the API answered 200 for
	reads    []chaosRead    // acks (read markers) the API answered 200 for
	ticks    []chaosTick    // presence updates sent
	failures map[string]int // failed attempts by reason
	quit     chan struct{}
	wg       sync.WaitGroup
}

// chaosAck is one acknowledged message.
type chaosAck struct {
	ack
	writer  int
	ackedAt time.Time
}

// chaosRead is one acknowledged read marker.
type chaosRead struct {
	user, channel, message string
	sentAt, doneAt         time.Time
}

// chaosTick is one presence update sent.
type chaosTick struct {
	user   string // whose presence
	name   string // the activity's name
	status string
	sentAt time.Time
}

// chaosWriter posts to one channel as one user; mention, when set, is a
// user id every message mentions.
type chaosWriter struct {
	token, channel, mention string
}

func newChaosTraffic(apis []string) *chaosTraffic {
	return &chaosTraffic{apis: apis, client: &http.Client{Timeout: 10 * time.Second}, failures: map[string]int{}}
}

// call sends one request with fail-over across the api nodes: transport
// errors, 5xx and 429 are retried on the next node for up to 30 s; the
// answer's status is returned.
func (tr *chaosTraffic) call(ctx context.Context, first int, token, method, path string, body, out any) (int, error) {
	deadline := time.Now().Add(30 * time.Second)
	for attempt := 0; ; attempt++ {
		api := rest{addr: tr.apis[(first+attempt)%len(tr.apis)], client: tr.client}
		status, raw, err := api.do(ctx, token, method, path, body, out)
		if err == nil && status/100 == 2 {
			return status, nil
		}
		reason := fmt.Sprintf("%s %d %s", method, status, truncate(string(raw), 120))
		if err != nil {
			reason = fmt.Sprintf("%s transport error", method)
		}
		tr.mu.Lock()
		tr.failures[reason]++
		tr.mu.Unlock()
		if ctx.Err() != nil {
			return status, ctx.Err()
		}
		if err == nil && status/100 == 4 && status != http.StatusTooManyRequests {
			return status, fmt.Errorf("%s %s: %d %s", method, path, status, raw)
		}
		if time.Now().After(deadline) {
			return status, fmt.Errorf("%s %s: no success within 30s: %v %d %s", method, path, err, status, raw)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Duration(100+rand.IntN(100)) * time.Millisecond): // retry backoff
		}
	}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// start runs writers, ackers and the presence ticker until stop; phase
// makes nonces unique.
func (tr *chaosTraffic) start(ctx context.Context, phase string, writers []chaosWriter, ackers []chaosAcker, tickers []chaosTicker) {
	tr.quit = make(chan struct{})
	for w, wr := range writers {
		tr.wg.Add(1)
		go func() {
			defer tr.wg.Done()
			pace := time.NewTicker(150 * time.Millisecond) // the writer's rate, not a wait for an event
			defer pace.Stop()
			for n := 0; ; n++ {
				select {
				case <-tr.quit:
					return
				case <-pace.C:
				}
				tr.post(ctx, w, wr, fmt.Sprintf("%s%d-%d", phase, w, n))
			}
		}()
	}
	for i, a := range ackers {
		tr.wg.Add(1)
		go func() {
			defer tr.wg.Done()
			pace := time.NewTicker(400 * time.Millisecond)
			defer pace.Stop()
			for {
				select {
				case <-tr.quit:
					return
				case <-pace.C:
				}
				if id := tr.newest(a.channel); id != "" {
					tr.read(ctx, i, a, id)
				}
			}
		}()
	}
	// Op 3 is limited to 5 per 20 s per session (more closes with 4008):
	// each ticker changes its presence every 4.5 s, the tickers spread
	// over the period.
	for i, tk := range tickers {
		tr.wg.Add(1)
		go func() {
			defer tr.wg.Done()
			const period = 4500 * time.Millisecond
			select {
			case <-tr.quit:
				return
			case <-time.After(period * time.Duration(i) / time.Duration(len(tickers))):
			}
			pace := time.NewTicker(period)
			defer pace.Stop()
			statuses := []string{"online", "idle", "dnd"}
			for n := 0; ; n++ {
				tr.presence(tk, fmt.Sprintf("%s-%s-tick-%d", tk.client.name, phase, n), statuses[n%len(statuses)])
				select {
				case <-tr.quit:
					return
				case <-pace.C:
				}
			}
		}()
	}
}

// stop ends the traffic after the requests in flight.
func (tr *chaosTraffic) stop() {
	close(tr.quit)
	tr.wg.Wait()
}

// post sends one message and records it when acknowledged.
func (tr *chaosTraffic) post(ctx context.Context, w int, wr chaosWriter, nonce string) (chaosAck, bool) {
	content := nonce
	if wr.mention != "" {
		content = "<@" + wr.mention + "> " + nonce
	}
	sent := time.Now()
	var m struct {
		ID string `json:"id"`
	}
	_, err := tr.call(ctx, w, wr.token, "POST", "/channels/"+wr.channel+"/messages",
		map[string]any{"content": content, "nonce": nonce, "enforce_nonce": true}, &m)
	if err != nil || m.ID == "" {
		return chaosAck{}, false
	}
	a := chaosAck{ack: ack{id: m.ID, channel: wr.channel, nonce: nonce, sentAt: sent}, writer: w, ackedAt: time.Now()}
	tr.mu.Lock()
	tr.acks = append(tr.acks, a)
	tr.mu.Unlock()
	return a, true
}

// chaosAcker acknowledges the newest message of channel as user.
type chaosAcker struct {
	user, token, channel string
}

// newest is the newest acknowledged message of channel.
func (tr *chaosTraffic) newest(channel string) string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for i := len(tr.acks) - 1; i >= 0; i-- {
		if tr.acks[i].channel == channel {
			return tr.acks[i].id
		}
	}
	return ""
}

// read acknowledges message in the acker's channel.
func (tr *chaosTraffic) read(ctx context.Context, i int, a chaosAcker, message string) error {
	sent := time.Now()
	if _, err := tr.call(ctx, i, a.token, "POST", "/channels/"+a.channel+"/messages/"+message+"/ack", map[string]any{}, nil); err != nil {
		return err
	}
	tr.mu.Lock()
	tr.reads = append(tr.reads, chaosRead{user: a.user, channel: a.channel, message: message, sentAt: sent, doneAt: time.Now()})
	tr.mu.Unlock()
	return nil
}

// chaosTicker changes client's presence; user is the client's user id.
type chaosTicker struct {
	client *chaosClient
	user   string
}

// presence sends op 3 with status and one activity called name; an
// update that could not be sent (the client reconnecting) is not
// recorded.
func (tr *chaosTraffic) presence(tk chaosTicker, name, status string) bool {
	c := tk.client
	sent := time.Now()
	err := c.send(map[string]any{"op": 3, "d": map[string]any{
		"status": status, "since": nil, "afk": false,
		"activities": []any{map[string]any{"name": name, "type": 0}}}})
	if err != nil {
		return false
	}
	tr.mu.Lock()
	tr.ticks = append(tr.ticks, chaosTick{user: tk.user, name: name, status: status, sentAt: sent})
	tr.mu.Unlock()
	return true
}

// snapshot copies what was acknowledged and sent so far.
func (tr *chaosTraffic) snapshot() ([]chaosAck, []chaosRead, []chaosTick) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]chaosAck(nil), tr.acks...), append([]chaosRead(nil), tr.reads...), append([]chaosTick(nil), tr.ticks...)
}

func (tr *chaosTraffic) failureSummary() map[string]int {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	out := make(map[string]int, len(tr.failures))
	for k, v := range tr.failures {
		out[k] = v
	}
	return out
}
