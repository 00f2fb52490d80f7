package transport_test

import (
	"context"
	"errors"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/adapters/store/pebble"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/services/dataservice"
	"github.com/concord-chat/concord/runtime/services/transport"
)

// TestDataClientCarriesEvents: with the data ring, a message write and
// its events go to the channel's data node in one call, and the node
// commits both in its store's one write; the wrapped store the API sees
// is a transactional outbox reading the outbox from the store.
func TestDataClientCarriesEvents(t *testing.T) {
	st, err := pebble.New(pebble.Config{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc := dataservice.New(st, dataservice.Config{Name: "data-1"})
	defer svc.Close()
	n1, _ := dataNode(t, "data-1", svc)
	dir := &staticDir{owners: []string{"data-1"}}
	dir.set(n1)
	c, err := transport.NewDataClient(transport.ClientConfig{}, transport.DataClientConfig{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tx, ok := dataservice.Wrap(st, c).(store.TransactionalOutbox)
	if !ok {
		t.Fatal("the wrapped store with a data client is not a store.TransactionalOutbox")
	}
	ctx := context.Background()
	const ch = snowflake.ID(5)
	ev := store.Event{Topic: "concord.messages", Key: []byte("5"), Value: []byte(`{"t":"MESSAGE_CREATE","id":"10","channel_id":"5"}`)}
	if err := tx.PutMessageEvents(ctx, store.Message{ID: 10, ChannelID: ch, Content: "hi"}, ev); err != nil {
		t.Fatal(err)
	}
	if m, err := st.GetMessage(ctx, ch, 10); err != nil || m.Content != "hi" {
		t.Fatalf("message on the data node's store: %+v, %v", m, err)
	}
	del := store.Event{Topic: "concord.messages", Key: []byte("5"), Value: []byte(`{"t":"MESSAGE_DELETE","id":"10","channel_id":"5"}`)}
	if err := tx.DeleteMessagesEvents(ctx, ch, []snowflake.ID{10}, del); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetMessage(ctx, ch, 10); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted message: %v", err)
	}
	es, err := tx.ListOutbox(ctx, store.OutboxShard(ch), 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 || string(es[0].Event.Value) != string(ev.Value) || string(es[1].Event.Value) != string(del.Value) || es[0].Event.Topic != ev.Topic || string(es[1].Event.Key) != "5" {
		t.Fatalf("outbox after a put and a delete through the data node: %+v", es)
	}
}

// TestDataNodeRefusesEventsItCannotCommit: a data node whose store
// cannot commit events refuses an event write rather than writing the
// message alone.
func TestDataNodeRefusesEventsItCannotCommit(t *testing.T) {
	backend := newMapMessages()
	n1, _ := dataNode(t, "data-1", backend)
	dir := &staticDir{owners: []string{"data-1"}}
	dir.set(n1)
	c, err := transport.NewDataClient(transport.ClientConfig{}, transport.DataClientConfig{MaxAttempts: 1}, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ew := c.(dataservice.EventWriter)
	err = ew.PutMessageEvents(context.Background(), store.Message{ID: 1, ChannelID: 5}, store.Event{Topic: "t", Value: []byte("v")})
	if err == nil {
		t.Fatal("an event write to a node that cannot commit events succeeded")
	}
	if backend.calls != 0 {
		t.Fatalf("the message was written without its event (%d backend calls)", backend.calls)
	}
}
