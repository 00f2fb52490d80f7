package transport_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/readstate"
	"github.com/concord-chat/concord/runtime/services/transport"
)

// fakeReadStates is a ReadStateBackend recording the channels asked for.
type fakeReadStates struct {
	asked    [][]snowflake.ID
	mentions []readstate.Mention
}

func (f *fakeReadStates) AddMentions(_ context.Context, ms []readstate.Mention) error {
	f.mentions = append(f.mentions, ms...)
	return nil
}

func (f *fakeReadStates) Ack(_ context.Context, user, channel, message snowflake.ID) (readstate.MessageAck, error) {
	if channel == 666 {
		return readstate.MessageAck{}, fmt.Errorf("%w: user %d", readstate.ErrForbidden, user)
	}
	return readstate.MessageAck{ChannelID: channel, MessageID: message, MentionCount: 2, Version: 7}, nil
}

func (f *fakeReadStates) States(_ context.Context, user snowflake.ID, channels []snowflake.ID) ([]readstate.State, error) {
	f.asked = append(f.asked, channels)
	return []readstate.State{{ChannelID: 5, LastReadID: 9, MentionCount: 3, Flags: 1}}, nil
}

func TestReadStateClientRoundTrip(t *testing.T) {
	backend := &fakeReadStates{}
	srv, err := transport.NewServer(transport.ServerConfig{}, transport.Services{ReadStates: backend})
	if err != nil {
		t.Fatal(err)
	}
	dir := &staticDir{owners: []string{"rs-1"}}
	dir.set(registry.Node{Name: "rs-1", Roles: []string{"readstate"}, Addr: serve(t, srv)})
	c := transport.NewReadStateClient(transport.ClientConfig{}, dir)
	defer c.Close()
	ctx := context.Background()

	ack, err := c.Ack(ctx, 1, 5, 9)
	if err != nil || ack != (readstate.MessageAck{ChannelID: 5, MessageID: 9, MentionCount: 2, Version: 7}) {
		t.Fatalf("Ack = %+v, %v", ack, err)
	}
	if _, err := c.Ack(ctx, 1, 666, 9); !errors.Is(err, readstate.ErrForbidden) {
		t.Fatalf("Ack of a hidden channel = %v, want readstate.ErrForbidden", err)
	}
	states, err := c.States(ctx, 1, nil)
	if err != nil || len(states) != 1 || states[0] != (readstate.State{ChannelID: 5, LastReadID: 9, MentionCount: 3, Flags: 1}) {
		t.Fatalf("States = %+v, %v", states, err)
	}
	if _, err := c.States(ctx, 1, []snowflake.ID{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.States(ctx, 1, []snowflake.ID{5, 6}); err != nil {
		t.Fatal(err)
	}
	if len(backend.asked) != 3 || backend.asked[0] != nil || backend.asked[1] == nil || len(backend.asked[1]) != 0 ||
		!slices.Equal(backend.asked[2], []snowflake.ID{5, 6}) {
		t.Fatalf("channels asked = %#v, want nil, empty, [5 6]", backend.asked)
	}
	want := []readstate.Mention{{User: 1, Channel: 5, Message: 9, Offset: 0}, {User: 2, Channel: 5, Message: 9, Offset: 0}}
	if err := c.AddMentions(ctx, want); err != nil || !slices.Equal(backend.mentions, want) {
		t.Fatalf("AddMentions = %v; the node got %+v, want %+v", err, backend.mentions, want)
	}
	if err := c.AddMentions(ctx, []readstate.Mention{{User: 1, Channel: 5, Offset: 3}}); !errors.Is(err, transport.ErrInvalid) {
		t.Fatalf("AddMentions without a message = %v, want ErrInvalid", err)
	}
}

func TestReadStateClientWithoutNode(t *testing.T) {
	c := transport.NewReadStateClient(transport.ClientConfig{}, &staticDir{})
	defer c.Close()
	if _, err := c.Ack(context.Background(), 1, 2, 3); !errors.Is(err, transport.ErrUnavailable) {
		t.Fatalf("Ack without a read-state node = %v, want ErrUnavailable", err)
	}
}
