package dev

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/gwtest"
	"github.com/concord-chat/concord/internal/resttest"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/app"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/config"
)

// TestInteractionReplyMentionCounts: on `concord dev` a bot's answer to a
// slash command — the callback's channel message and a followup — that
// mentions a member raises that member's mention count, as a REST send
// does: the reply's event carries its mentions to the read-state
// consumer. READY's read_state then shows the count.
func TestInteractionReplyMentionCounts(t *testing.T) { testInteractionReplyMentionCounts(t) }

func testInteractionReplyMentionCounts(t *testing.T, opts ...func(*config.Config)) {
	p, addr := startTestPlatform(t, opts...)
	// The bot platform's writes go through the store's outbox here.
	if _, ok := p.Store().(store.TransactionalOutbox); !ok {
		t.Fatalf("the store %T is not a transactional outbox", p.Store())
	}
	alice, bob, g, ch := guildOfTwo(t, addr, "bot mentions")

	// alice's application, installed in her guild, with one slash command.
	var app struct {
		ID string `json:"id"`
	}
	resttest.Call(t, addr, alice.Token, "POST", "/applications", map[string]any{"name": "Pinger"}, &app)
	var reset struct {
		Token string `json:"token"`
	}
	resttest.Call(t, addr, alice.Token, "POST", "/applications/"+app.ID+"/bot/reset", nil, &reset)
	perms := fmt.Sprint(1<<10 | 1<<11 | 1<<16) // VIEW_CHANNEL, SEND_MESSAGES, READ_MESSAGE_HISTORY
	resttest.Call(t, addr, alice.Token, "POST", "/oauth2/authorize?client_id="+app.ID+"&scope=bot&permissions="+perms,
		map[string]any{"guild_id": g.ID, "permissions": perms, "authorize": true}, nil)
	var cmd struct {
		ID string `json:"id"`
	}
	resttest.Call(t, addr, "Bot "+reset.Token, "POST", "/applications/"+app.ID+"/guilds/"+g.ID+"/commands",
		map[string]any{"name": "ping", "description": "pings bob", "type": 1}, &cmd)

	// The bot's gateway session receives the interaction once it is
	// subscribed to the guild (its GUILD_CREATE).
	bot := identifyBot(t, addr, reset.Token)
	bot.next("READY")
	bot.next("GUILD_CREATE")
	resttest.Call(t, addr, alice.Token, "POST", "/interactions", map[string]any{
		"type": 2, "application_id": app.ID, "guild_id": g.ID, "channel_id": ch.ID,
		"data": map[string]any{"id": cmd.ID, "name": "ping", "type": 1},
	}, nil)
	var ix struct {
		ID    string `json:"id"`
		Token string `json:"token"`
	}
	if err := json.Unmarshal(bot.next("INTERACTION_CREATE"), &ix); err != nil {
		t.Fatal(err)
	}
	resttest.Call(t, addr, "", "POST", "/interactions/"+ix.ID+"/"+ix.Token+"/callback",
		map[string]any{"type": 4, "data": map[string]any{"content": "pong <@" + bob.UserID + ">"}}, nil)

	bobID, _ := snowflake.Parse(bob.UserID)
	chID, _ := snowflake.Parse(ch.ID)
	awaitMentions(t, p, bobID, chID, 1)

	var follow struct {
		ID string `json:"id"`
	}
	resttest.Call(t, addr, "", "POST", "/webhooks/"+app.ID+"/"+ix.Token,
		map[string]any{"content": "and again <@" + bob.UserID + ">"}, &follow)
	awaitMentions(t, p, bobID, chID, 2)

	// A new session of bob's sees the count in READY.
	s := identify(t, addr, bob.Token)
	var ready struct {
		ReadState struct {
			Entries []struct {
				ID           string `json:"id"`
				MentionCount int    `json:"mention_count"`
			} `json:"entries"`
		} `json:"read_state"`
	}
	if err := json.Unmarshal(s.next("READY"), &ready); err != nil {
		t.Fatal(err)
	}
	for _, e := range ready.ReadState.Entries {
		if e.ID == ch.ID {
			if e.MentionCount != 2 {
				t.Fatalf("READY read_state of %s has mention_count %d, want 2", ch.ID, e.MentionCount)
			}
			return
		}
	}
	t.Fatalf("READY read_state lacks channel %s: %+v", ch.ID, ready.ReadState)
}

// awaitMentions waits for user's mention count in channel to reach want
// (the mention travels the event log to the read-state role; on a Kafka
// that just started the consumer group's first join can take tens of
// seconds on a loaded machine) and fails if it passes it.
func awaitMentions(t *testing.T, p *app.Node, user, channel snowflake.ID, want int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := p.ReadStates().Local().ChannelState(context.Background(), user, channel)
		if err != nil {
			t.Fatal(err)
		}
		if st.MentionCount == want {
			return
		}
		if st.MentionCount > want || time.Now().After(deadline) {
			t.Fatalf("mention count of %d in %d = %d, want %d", user, channel, st.MentionCount, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// identifyBot is identify for a bot: GUILDS and GUILD_MESSAGES only (a
// bot asking for the privileged MESSAGE_CONTENT without it is refused).
func identifyBot(t *testing.T, addr, token string) *gwClient {
	t.Helper()
	return dialGateway(t, addr, "bot", token, gwtest.Options{Intents: 1<<0 | 1<<9})
}
