package api

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/readstate"
)

// readStatesFunc is a ReadStates answering with a function.
type readStatesFunc func(user, channel, message snowflake.ID) (readstate.MessageAck, error)

func (f readStatesFunc) Ack(_ context.Context, user, channel, message snowflake.ID) (readstate.MessageAck, error) {
	return f(user, channel, message)
}

// TestAckAnswers: an ack the read-state service takes is 200 with
// Discord's {"token": null}; a channel it says the user cannot see is
// 403/50001; the service failing (closed, its store, no replica
// reachable) is a 503 the client may retry, never a 500.
func TestAckAnswers(t *testing.T) {
	e := newEnv(t)
	e.inProcess("it serves a second handler with a read-state service of its own")
	alice := e.register("ack-alice", false)
	var g struct {
		ID snowflake.ID `json:"id"`
	}
	e.ok("POST", "/api/v10/guilds", alice.Token, map[string]any{"name": "acks"}, &g)
	var chans []struct {
		ID   snowflake.ID `json:"id"`
		Type int          `json:"type"`
	}
	e.ok("GET", fmt.Sprintf("/api/v10/guilds/%d/channels", g.ID), alice.Token, nil, &chans)
	channel := snowflake.ID(0)
	for _, c := range chans {
		if c.Type == 0 {
			channel = c.ID
		}
	}
	var m struct {
		ID snowflake.ID `json:"id"`
	}
	e.ok("POST", fmt.Sprintf("/api/v10/channels/%d/messages", channel), alice.Token, map[string]any{"content": "read me"}, &m)
	ackPath := fmt.Sprintf("/api/v10/channels/%d/messages/%d/ack", channel, m.ID)

	with := func(reads ReadStates) *env {
		srv := httptest.NewServer(New(Config{}, Deps{Store: e.store, Guilds: e.guilds, Auth: e.auth, IDs: e.ids, Objects: e.objs, ReadStates: reads}))
		t.Cleanup(srv.Close)
		e2 := *e
		e2.srv, e2.url = srv, srv.URL
		return &e2
	}
	var got []snowflake.ID
	ok := with(readStatesFunc(func(user, ch, msg snowflake.ID) (readstate.MessageAck, error) {
		got = append(got, user, ch, msg)
		return readstate.MessageAck{}, nil
	}))
	var body map[string]any
	ok.ok("POST", ackPath, alice.Token, map[string]any{}, &body)
	if v, present := body["token"]; !present || v != nil || len(got) != 3 || got[0] != alice.ID || got[1] != channel || got[2] != m.ID {
		t.Fatalf("ack answered %v and reached the service with %v", body, got)
	}
	with(readStatesFunc(func(_, _, _ snowflake.ID) (readstate.MessageAck, error) {
		return readstate.MessageAck{}, readstate.ErrForbidden
	})).fail("POST", ackPath, alice.Token, map[string]any{}, 403, 50001)
	for _, cause := range []error{readstate.ErrClosed, readstate.ErrStore, errors.New("transport: no read-state node")} {
		with(readStatesFunc(func(_, _, _ snowflake.ID) (readstate.MessageAck, error) {
			return readstate.MessageAck{}, fmt.Errorf("read-state: %w", cause)
		})).fail("POST", ackPath, alice.Token, map[string]any{}, 503, 0)
	}
}
