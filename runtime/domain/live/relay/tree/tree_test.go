package tree

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live/relay/relaytest"
)

type fleet struct {
	t     *testing.T
	urls  []string
	nodes []*Node
	srvs  []*httptest.Server
}

// startFleet runs n relay nodes on their own HTTP servers with small
// fan-outs, so a test audience needs three tiers.
func startFleet(t *testing.T, n, owner, child int) *fleet {
	f := &fleet{t: t}
	for range n {
		var node *Node
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { node.ServeHTTP(w, r) }))
		// Subscriptions a failed test left open would hold Close forever.
		t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
		f.srvs = append(f.srvs, srv)
		f.urls = append(f.urls, srv.URL)
		node = NewNode(NodeConfig{Self: srv.URL, OwnerFanout: owner, ChildFanout: child, Logger: slog.New(slog.DiscardHandler)})
		f.nodes = append(f.nodes, node)
	}
	for _, node := range f.nodes {
		node.SetNodes(f.urls)
	}
	return f
}

// kill stops node i as a crash would.
func (f *fleet) kill(i int) {
	f.srvs[i].Listener.Close()
	f.srvs[i].CloseClientConnections()
}

// direct counts node i's direct subscribers of stream, under any parent.
func (f *fleet) direct(i int, stream snowflake.ID) int {
	n := f.nodes[i]
	n.mu.Lock()
	defer n.mu.Unlock()
	subs := 0
	for k, t := range n.topics {
		if k.stream == stream {
			subs += len(t.subs)
		}
	}
	return subs
}

// subscriber records what one gateway's subscription delivers.
type subscriber struct {
	mu  sync.Mutex
	got []int
}

func (s *subscriber) deliver(msg []byte) {
	n, _ := strconv.Atoi(string(msg))
	s.mu.Lock()
	s.got = append(s.got, n)
	s.mu.Unlock()
}

func (s *subscriber) has(n int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range s.got {
		if x == n {
			return true
		}
	}
	return false
}

// subscribeAll subscribes n gateways to stream, each with a client of
// its own knowing nodes, and returns their recorders and clients.
func subscribeAll(t *testing.T, nodes []string, stream snowflake.ID, n int) ([]*subscriber, []*Client) {
	t.Helper()
	subs, clients := make([]*subscriber, n), make([]*Client, n)
	for i := range subs {
		subs[i] = &subscriber{}
		clients[i] = NewClient(nodes, slog.New(slog.DiscardHandler))
		cancel, err := clients[i].Subscribe(context.Background(), stream, subs[i].deliver)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cancel)
	}
	return subs, clients
}

// publishUntil publishes increasing numbers until every subscriber has
// one of them, and returns the last.
func publishUntil(t *testing.T, c *Client, stream snowflake.ID, next *int, subs []*subscriber) int {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		*next++
		if _, err := c.PublishCount(context.Background(), stream, []byte(strconv.Itoa(*next))); err != nil {
			t.Fatal(err)
		}
		all := true
		for _, s := range subs {
			all = all && s.has(*next)
		}
		if all {
			return *next
		}
		if time.Now().After(deadline) {
			missing := 0
			for _, s := range subs {
				if !s.has(*next) {
					missing++
				}
			}
			t.Fatalf("after 15 s %d of %d subscribers do not receive", missing, len(subs))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The relay conformance suite over a tree whose owner feeds one
// subscriber, so the second subscription of a stream goes through a child
// relay: a message published right after Subscribe returned reaches it
// too. Before, Subscribe returned before any relay had answered, and a
// child answered before its own upstream had: a gateway's first comment
// was lost now and then (the stream's order property caught it in CI).
func TestConformance(t *testing.T) {
	f := startFleet(t, 3, 1, 1)
	relaytest.Run(t, NewClient(f.urls, slog.New(slog.DiscardHandler)), NewClient(f.urls, slog.New(slog.DiscardHandler)))
}

// 24 gateways on a stream whose owner feeds 5 and whose other relays feed
// 3: the owner copies each message once per direct subscriber (its
// gateways and its second-tier relays), never once per gateway, and
// every gateway receives every message in publish order.
func TestTreeGrowsTiers(t *testing.T) {
	f := startFleet(t, 6, 5, 3)
	stream := snowflake.ID(4242)
	c := NewClient(f.urls, slog.New(slog.DiscardHandler))
	subs, _ := subscribeAll(t, f.urls, stream, 24)
	next := 0
	first := publishUntil(t, c, stream, &next, subs)
	for range 50 {
		next++
		copies, err := c.PublishCount(context.Background(), stream, []byte(strconv.Itoa(next)))
		if err != nil {
			t.Fatal(err)
		}
		if copies >= len(subs) {
			t.Fatalf("the owner copied a message %d times for %d gateways: no tree", copies, len(subs))
		}
	}
	last := publishUntil(t, c, stream, &next, subs)
	for i, s := range subs {
		s.mu.Lock()
		var seen []int
		for _, n := range s.got {
			if n >= first && n <= last {
				seen = append(seen, n)
			}
		}
		s.mu.Unlock()
		for j := 1; j < len(seen); j++ {
			if seen[j] != seen[j-1]+1 {
				t.Fatalf("gateway %d: %d after %d", i, seen[j], seen[j-1])
			}
		}
	}
	owner := Owner(stream, f.urls, nil)
	for i, u := range f.urls {
		t.Logf("relay %d: %d direct subscribers%s", i, f.direct(i, stream), map[bool]string{true: " (owner)"}[u == owner])
	}
}

// A second-tier relay dies: its gateways resubscribe through the owner,
// which places them on a live sibling, and receive again.
func TestDeadRelayResubscribe(t *testing.T) {
	f := startFleet(t, 5, 4, 4)
	stream := snowflake.ID(777)
	c := NewClient(f.urls, slog.New(slog.DiscardHandler))
	subs, _ := subscribeAll(t, f.urls, stream, 16)
	next := 0
	publishUntil(t, c, stream, &next, subs)
	owner := Owner(stream, f.urls, nil)
	victim := -1
	for i, u := range f.urls {
		if u != owner && f.direct(i, stream) > 0 && (victim < 0 || f.direct(i, stream) > f.direct(victim, stream)) {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatal("no second-tier relay")
	}
	held := f.direct(victim, stream)
	killed := time.Now()
	f.kill(victim)
	publishUntil(t, c, stream, &next, subs)
	t.Logf("killed a second-tier relay feeding %d gateways: all receive again after %s", held, time.Since(killed).Round(time.Millisecond))
}

// A relay node joins and becomes the owner of a subscribed stream: the
// publisher sends to the new owner, so each subscription must end and
// re-form through it. Before, gateways stayed on the former owner, which
// got nothing more, and their viewers received no further comment.
func TestJoiningOwnerTakesSubscriptions(t *testing.T) {
	f := startFleet(t, 3, 4, 4)
	before, all := f.urls[:2], f.urls
	stream := snowflake.ID(1)
	for Owner(stream, all, nil) != all[2] {
		stream++
	}
	pub := NewClient(before, slog.New(slog.DiscardHandler))
	subs, clients := subscribeAll(t, before, stream, 6)
	next := 0
	publishUntil(t, pub, stream, &next, subs)

	// The board announces the third node to the router and the gateways.
	joined := time.Now()
	pub.SetNodes(all)
	for _, c := range clients {
		c.SetNodes(all)
	}
	publishUntil(t, pub, stream, &next, subs)
	if n := f.direct(2, stream); n == 0 {
		t.Fatalf("the new owner has no direct subscriber of the stream")
	}
	t.Logf("a joining relay took the stream: every subscriber receives through it %s later", time.Since(joined).Round(time.Millisecond))
}

// The stream's owner dies and the node set has not changed yet (the
// board learns of it when its lease ends): each subscription finds the
// owner unreachable, skips it for DownFor and re-forms through the next
// node by rendezvous, as the publisher does.
func TestDeadOwnerResubscribe(t *testing.T) {
	f := startFleet(t, 3, 4, 4)
	stream := snowflake.ID(99)
	pub := NewClient(f.urls, slog.New(slog.DiscardHandler))
	subs, _ := subscribeAll(t, f.urls, stream, 4)
	next := 0
	publishUntil(t, pub, stream, &next, subs)
	owner := Owner(stream, f.urls, nil)
	for i, u := range f.urls {
		if u == owner {
			f.kill(i)
		}
	}
	killed := time.Now()
	publishUntil(t, pub, stream, &next, subs)
	t.Logf("the owner died: every subscriber receives through the next node %s later", time.Since(killed).Round(time.Millisecond))
}

// A node that holds a stream from one parent (the former owner, or as
// its owner itself) is sent a subscriber by another parent (a node that
// joined and took the stream): that subscriber is fed by the parent that
// sent it. Before, a child of the former owner served it from the topic
// it had, fed by the former owner, which no one publishes to any more:
// the gateway received nothing, forever (TestJoiningOwnerTakesSubscriptions,
// now and then); and a node holding the stream as its owner closed the
// topic's ready channel a second time when the new owner answered, and
// panicked (CI).
func TestSubscriberFedByTheParentThatSentIt(t *testing.T) {
	f := startFleet(t, 4, 4, 4)
	former, child, owned, joined := f.urls[0], f.urls[1], f.urls[2], f.urls[3]
	stream := snowflake.ID(42)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	follow := func(u string) *subscriber {
		s := &subscriber{}
		answered := make(chan struct{})
		go read(ctx, http.DefaultClient, u, func() { close(answered) }, s.deliver)
		select {
		case <-answered:
		case <-time.After(10 * time.Second):
			t.Fatalf("no answer from %s", u)
		}
		return s
	}
	path := "/v1/relay/" + stream.String()
	// child holds the stream fed by the former owner; owned holds it as
	// its owner. Then the joined owner sends each a subscriber.
	old := follow(child + path + "?parent=" + former + "&path=" + former)
	rooted := follow(owned + path)
	movedChild := follow(child + path + "?parent=" + joined + "&path=" + joined)
	movedOwned := follow(owned + path + "?parent=" + joined + "&path=" + joined)
	post := func(owner, msg string) {
		resp, err := http.Post(owner+path, "application/octet-stream", strings.NewReader(msg))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	wait := func(s *subscriber, n int) {
		deadline := time.Now().Add(10 * time.Second)
		for !s.has(n) {
			if time.Now().After(deadline) {
				t.Fatalf("message %d not received", n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	post(joined, "1")
	wait(movedChild, 1)
	wait(movedOwned, 1)
	post(former, "2")
	wait(old, 2)
	post(owned, "3")
	wait(rooted, 3)
	for _, s := range []*subscriber{old, rooted, movedChild, movedOwned} {
		s.mu.Lock()
		if len(s.got) != 1 {
			t.Errorf("a subscriber got %v: messages of another parent", s.got)
		}
		s.mu.Unlock()
	}
}
