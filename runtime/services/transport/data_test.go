package transport_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/services/dataservice"
	"github.com/concord-chat/concord/runtime/services/transport"
)

// mapMessages is a store.Messages in a map, recording which node served.
type mapMessages struct {
	mu    sync.Mutex
	msgs  map[snowflake.ID]store.Message
	calls int
	err   error
}

func newMapMessages() *mapMessages { return &mapMessages{msgs: map[snowflake.ID]store.Message{}} }

func (m *mapMessages) hit() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	return m.err
}

func (m *mapMessages) PutMessage(_ context.Context, msg store.Message) error {
	if err := m.hit(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.msgs[msg.ID] = msg
	return nil
}

func (m *mapMessages) GetMessage(_ context.Context, ch, id snowflake.ID) (store.Message, error) {
	if err := m.hit(); err != nil {
		return store.Message{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	msg, ok := m.msgs[id]
	if !ok || msg.ChannelID != ch {
		return store.Message{}, store.ErrNotFound
	}
	return msg, nil
}

func (m *mapMessages) DeleteMessage(_ context.Context, ch, id snowflake.ID) error {
	if err := m.hit(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.msgs[id]; !ok {
		return store.ErrNotFound
	}
	delete(m.msgs, id)
	return nil
}

func (m *mapMessages) DeleteMessages(_ context.Context, _ snowflake.ID, ids []snowflake.ID) error {
	if err := m.hit(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		delete(m.msgs, id)
	}
	return nil
}

func (m *mapMessages) ListMessages(_ context.Context, ch snowflake.ID, _ store.HistoryQuery) ([]store.Message, error) {
	if err := m.hit(); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []store.Message
	for _, msg := range m.msgs {
		if msg.ChannelID == ch {
			out = append(out, msg)
		}
	}
	slices.SortFunc(out, func(a, b store.Message) int { return int(b.ID) - int(a.ID) })
	return out, nil
}

func (m *mapMessages) Buckets(context.Context, snowflake.ID) ([]int64, error) {
	if err := m.hit(); err != nil {
		return nil, err
	}
	return []int64{2, 1}, nil
}

// dataNode serves backend as a DataNode.
func dataNode(t *testing.T, name string, backend store.Messages) (registry.Node, *transport.Server) {
	t.Helper()
	srv, err := transport.NewServer(transport.ServerConfig{}, transport.Services{Data: backend})
	if err != nil {
		t.Fatal(err)
	}
	return registry.Node{Name: name, Roles: []string{dataservice.Role}, Addr: serve(t, srv)}, srv
}

func TestDataClientRoundTrip(t *testing.T) {
	backend := newMapMessages()
	n1, _ := dataNode(t, "data-1", backend)
	dir := &staticDir{owners: []string{"data-1"}}
	dir.set(n1)
	c, err := transport.NewDataClient(transport.ClientConfig{}, transport.DataClientConfig{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()

	edited := time.Unix(1700000000, 123000000).UTC()
	want := store.Message{
		ID: 10, ChannelID: 5, GuildID: 3, AuthorID: 7, Content: "hi", Type: 19, Flags: 4, TTS: true, Pinned: true,
		EditedAt: edited, ReferenceID: 9, MentionEveryone: true, Mentions: []snowflake.ID{7, 8}, MentionRoles: []snowflake.ID{3},
		Attachments: []store.Attachment{{ID: 11, Filename: "a.png", Size: 12, URL: "https://x/a.png", ContentType: "image/png"}},
		Nonce:       "n-1",
	}
	if err := c.PutMessage(ctx, want); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetMessage(ctx, 5, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got.Content != want.Content || !got.EditedAt.Equal(edited) || !slices.Equal(got.Mentions, want.Mentions) ||
		len(got.Attachments) != 1 || got.Attachments[0] != want.Attachments[0] || got.Nonce != "n-1" || !got.TTS || got.Type != 19 {
		t.Fatalf("GetMessage = %+v, want %+v", got, want)
	}
	if err := c.PutMessage(ctx, store.Message{ID: 12, ChannelID: 5, Content: "second"}); err != nil {
		t.Fatal(err)
	}
	page, err := c.ListMessages(ctx, 5, store.HistoryQuery{Limit: 50})
	if err != nil || len(page) != 2 || page[0].ID != 12 || !page[1].EditedAt.Equal(edited) {
		t.Fatalf("ListMessages = %+v, %v", page, err)
	}
	if b, err := c.Buckets(ctx, 5); err != nil || !slices.Equal(b, []int64{2, 1}) {
		t.Fatalf("Buckets = %v, %v", b, err)
	}
	if _, err := c.GetMessage(ctx, 5, 99); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetMessage of a missing message = %v, want store.ErrNotFound", err)
	}
	if err := c.DeleteMessage(ctx, 5, 99); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("DeleteMessage of a missing message = %v, want store.ErrNotFound", err)
	}
	if err := c.DeleteMessages(ctx, 5, []snowflake.ID{10, 12}); err != nil {
		t.Fatal(err)
	}
	if page, err := c.ListMessages(ctx, 5, store.HistoryQuery{}); err != nil || len(page) != 0 {
		t.Fatalf("ListMessages after DeleteMessages = %+v, %v", page, err)
	}
}

func TestDataClientUnavailableCrossesTheWire(t *testing.T) {
	backend := newMapMessages()
	backend.err = errors.Join(errors.New("cassandra: no hosts"), store.ErrUnavailable)
	n1, _ := dataNode(t, "data-1", backend)
	dir := &staticDir{owners: []string{"data-1"}}
	dir.set(n1)
	c, err := transport.NewDataClient(transport.ClientConfig{}, transport.DataClientConfig{MaxAttempts: 2, Backoff: time.Millisecond}, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.ListMessages(context.Background(), 5, store.HistoryQuery{})
	if !errors.Is(err, store.ErrUnavailable) || !dataservice.IsRetryable(err) {
		t.Fatalf("unavailable store came back as %v", err)
	}
	if backend.calls != 2 {
		t.Fatalf("backend saw %d calls, want 2 (the first and one retry)", backend.calls)
	}
	// A closing instance is retryable too.
	backend.err = dataservice.ErrClosed
	if err := c.PutMessage(context.Background(), store.Message{ID: 1, ChannelID: 5}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("closed instance came back as %v", err)
	}
}

func TestDataClientRetriesOnTheNewOwner(t *testing.T) {
	b1, b2 := newMapMessages(), newMapMessages()
	n1, srv1 := dataNode(t, "data-1", b1)
	n2, _ := dataNode(t, "data-2", b2)
	// The first call goes to data-1, which is dead by then; the ring
	// then names data-2.
	dir := &staticDir{owners: []string{"data-1", "data-2"}}
	dir.set(n1)
	dir.set(n2)
	srv1.Stop()
	c, err := transport.NewDataClient(transport.ClientConfig{}, transport.DataClientConfig{Backoff: time.Millisecond}, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.PutMessage(context.Background(), store.Message{ID: 1, ChannelID: 5, Content: "x"}); err != nil {
		t.Fatalf("PutMessage with a dead owner: %v", err)
	}
	if b1.calls != 0 || b2.calls != 1 {
		t.Fatalf("calls: data-1 %d, data-2 %d; want 0 and 1", b1.calls, b2.calls)
	}
	if m, err := c.GetMessage(context.Background(), 5, 1); err != nil || m.Content != "x" {
		t.Fatalf("GetMessage on the new owner = %+v, %v", m, err)
	}
}
