package dev

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/gwtest"
	"github.com/concord-chat/concord/internal/resttest"
	"github.com/concord-chat/concord/runtime/app"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/config"
)

// startTestPlatform runs `concord dev` (app.Open with every role of the
// default tables) with embedded backends on loopback.
func startTestPlatform(t *testing.T, opts ...func(*config.Config)) (*app.Node, string) {
	t.Helper()
	return startDev(t, app.DefaultTables(), opts...)
}

// startDev runs every role of tables in one process, as `concord dev`
// does (app.Open; the tables are the one test seam of the role tables),
// with embedded backends on loopback, and serves it until the test ends.
func startDev(t *testing.T, tables app.Tables, opts ...func(*config.Config)) (*app.Node, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg := config.Default()
	cfg.Roles = tables.Names()
	cfg.DataDir = t.TempDir()
	cfg.DevUser = false
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, o := range opts {
		o(&cfg)
	}
	cfg.HTTP = "127.0.0.1:0"
	p, err := app.Open(ctx, cfg, app.Options{Tables: tables})
	if err != nil {
		cancel()
		t.Fatalf("concord dev: %v", err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Serve(ctx) }()
	t.Cleanup(func() { cancel(); <-done; p.Close() })
	return p, p.HTTPAddr()
}

// idOnly is the id of a created object.
type idOnly struct {
	ID string `json:"id"`
}

// awaitMentionCount polls the read-state role until user's mention count
// in ch is want (the count is the role's state, reached through the event
// log: there is no event to await), failing after a minute.
func awaitMentionCount(t *testing.T, p *app.Node, what string, user, ch snowflake.ID, want int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := p.ReadStates().Local().ChannelState(context.Background(), user, ch)
		if err != nil {
			t.Fatal(err)
		}
		if st.MentionCount == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: mention_count %d, want %d (%+v)", what, st.MentionCount, want, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// guildOfTwo registers alice and bob; alice creates a guild named name
// with a #news channel and bob joins it through an invite.
func guildOfTwo(t *testing.T, addr, name string) (alice, bob testUser, g, ch idOnly) {
	t.Helper()
	resttest.Call(t, addr, "", "POST", "/auth/register", map[string]string{"username": "alice", "password": "alice password"}, &alice)
	resttest.Call(t, addr, "", "POST", "/auth/register", map[string]string{"username": "bob", "password": "bob password!"}, &bob)
	resttest.Call(t, addr, alice.Token, "POST", "/guilds", map[string]string{"name": name}, &g)
	resttest.Call(t, addr, alice.Token, "POST", "/guilds/"+g.ID+"/channels", map[string]any{"name": "news"}, &ch)
	var inv struct {
		Code string `json:"code"`
	}
	resttest.Call(t, addr, alice.Token, "POST", "/channels/"+ch.ID+"/invites", map[string]any{}, &inv)
	resttest.Call(t, addr, bob.Token, "POST", "/invites/"+inv.Code, map[string]any{}, nil)
	return alice, bob, g, ch
}

// identify connects as a user (GUILDS, GUILD_MESSAGES, MESSAGE_CONTENT);
// it does not wait for READY.
func identify(t *testing.T, addr, token string) *gwClient {
	t.Helper()
	return dialGateway(t, addr, "user", token, gwtest.Options{})
}

// TestAckClearsBadgeOnOtherDevice: a user mentioned in a channel has a
// mention count; acking on one device sends MESSAGE_ACK with a zero count
// to the user's other session, and a later READY carries the cleared state.
func TestAckClearsBadgeOnOtherDevice(t *testing.T) { testAckClearsBadge(t) }

func testAckClearsBadge(t *testing.T, opts ...func(*config.Config)) {
	p, addr := startTestPlatform(t, opts...)
	alice, bob, _, ch := guildOfTwo(t, addr, "badges")

	phone := identify(t, addr, bob.Token)
	desktop := identify(t, addr, bob.Token)
	phone.next("READY")
	desktop.next("READY")
	desktop.next("GUILD_CREATE")

	var m struct {
		ID string `json:"id"`
	}
	resttest.Call(t, addr, alice.Token, "POST", "/channels/"+ch.ID+"/messages", map[string]any{"content": "hey <@" + bob.UserID + ">"}, &m)
	desktop.next("MESSAGE_CREATE")

	bobID, _ := snowflake.Parse(bob.UserID)
	chID, _ := snowflake.Parse(ch.ID)
	// The mention reaches the read-state role through the event log (on a
	// Kafka that just started, the consumer group's first join can take
	// tens of seconds on a loaded machine).
	awaitMentionCount(t, p, "bob mentioned once", bobID, chID, 1)

	// Bob reads on his phone (REST ack); his desktop's badge clears.
	resttest.Call(t, addr, bob.Token, "POST", "/channels/"+ch.ID+"/messages/"+m.ID+"/ack", map[string]any{}, nil)
	var ack struct {
		ChannelID    string `json:"channel_id"`
		MessageID    string `json:"message_id"`
		MentionCount int    `json:"mention_count"`
	}
	if err := json.Unmarshal(desktop.next("MESSAGE_ACK"), &ack); err != nil {
		t.Fatal(err)
	}
	if ack.ChannelID != ch.ID || ack.MessageID != m.ID || ack.MentionCount != 0 {
		t.Fatalf("MESSAGE_ACK = %+v", ack)
	}

	// A new device sees the cleared state in READY.
	tablet := identify(t, addr, bob.Token)
	var ready struct {
		ReadState struct {
			Entries []struct {
				ID            string `json:"id"`
				LastMessageID string `json:"last_message_id"`
				MentionCount  int    `json:"mention_count"`
			} `json:"entries"`
		} `json:"read_state"`
	}
	if err := json.Unmarshal(tablet.next("READY"), &ready); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range ready.ReadState.Entries {
		if e.ID == ch.ID {
			found = true
			if e.LastMessageID != m.ID || e.MentionCount != 0 {
				t.Fatalf("READY read state %+v", e)
			}
		}
	}
	if !found {
		t.Fatalf("READY read_state lacks channel %s: %+v", ch.ID, ready.ReadState)
	}
}
