package dev

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/services/apirole"

	"github.com/concord-chat/concord/internal/resttest"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/bots"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// TestBotMessagesInArchivedThreads: an interaction reply or followup in
// an archived thread can be neither edited nor deleted (50083), as with
// the REST API; in a channel that is not an archived thread both work.
func TestBotMessagesInArchivedThreads(t *testing.T) {
	p, addr := startTestPlatform(t, func(c *config.Config) { c.DevUser = true })
	tok := p.DevToken()
	var g struct {
		ID snowflake.ID `json:"id"`
	}
	resttest.Call(t, addr, tok, "POST", "/guilds", map[string]any{"name": "frozen"}, &g)
	var chans []wire.Channel
	resttest.Call(t, addr, tok, "GET", fmt.Sprintf("/guilds/%d/channels", g.ID), nil, &chans)
	var text snowflake.ID
	for _, c := range chans {
		if c.Type == 0 {
			text = c.ID
		}
	}
	if text == 0 {
		t.Fatalf("no text channel in %+v", chans)
	}
	var starter, inThread, plain wire.Message
	resttest.Call(t, addr, tok, "POST", fmt.Sprintf("/channels/%d/messages", text), map[string]any{"content": "thread here"}, &starter)
	var th wire.Channel
	resttest.Call(t, addr, tok, "POST", fmt.Sprintf("/channels/%d/messages/%d/threads", text, starter.ID), map[string]any{"name": "t"}, &th)
	resttest.Call(t, addr, tok, "POST", fmt.Sprintf("/channels/%d/messages", th.ID), map[string]any{"content": "in the thread"}, &inThread)
	resttest.Call(t, addr, tok, "POST", fmt.Sprintf("/channels/%d/messages", text), map[string]any{"content": "plain"}, &plain)
	resttest.Call(t, addr, tok, "PATCH", fmt.Sprintf("/channels/%d", th.ID), map[string]any{"archived": true}, nil)

	bm := apirole.NewMessages(p.Store(), p.Guilds(), nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx := context.Background()
	edited := "edited"
	if _, err := bm.EditMessage(ctx, bots.MessageEdit{ChannelID: th.ID, MessageID: inThread.ID, Content: &edited}); !errors.Is(err, bots.ErrThreadArchived) {
		t.Fatalf("edit in an archived thread: %v, want ErrThreadArchived", err)
	}
	if err := bm.DeleteMessage(ctx, th.ID, inThread.ID, 0); !errors.Is(err, bots.ErrThreadArchived) {
		t.Fatalf("delete in an archived thread: %v, want ErrThreadArchived", err)
	}
	if _, err := p.Store().GetMessage(ctx, th.ID, inThread.ID); err != nil {
		t.Fatalf("the refused delete removed the message: %v", err)
	}
	out, err := bm.EditMessage(ctx, bots.MessageEdit{ChannelID: text, MessageID: plain.ID, Content: &edited})
	if err != nil || out.Content != edited {
		t.Fatalf("edit in a text channel: %+v, %v", out, err)
	}
	if err := bm.DeleteMessage(ctx, text, plain.ID, 0); err != nil {
		t.Fatalf("delete in a text channel: %v", err)
	}
}
