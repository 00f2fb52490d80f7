package conformance

import (
	"net/http"
	"testing"

	"github.com/bwmarrin/discordgo"
)

// rewriteTransport sends discordgo's https://discord.com requests to the
// Concord server instead, unchanged otherwise.
type rewriteTransport struct{ host string }

func (rt rewriteTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Scheme = "http"
	r.URL.Host = rt.host
	r.Host = rt.host
	return http.DefaultTransport.RoundTrip(r)
}

// TestDiscordgoBot drives an unmodified discordgo v0.29 bot: it builds its
// state from READY and GUILD_CREATE, receives a user's REST post, replies,
// edits and deletes, and resumes after a forced socket drop without
// missing an event.
func TestDiscordgoBot(t *testing.T) {
	s := startServer(t)
	w := newWorld(s, "dg")

	dg, err := discordgo.New("Bot " + w.botToken)
	must(t, err, "discordgo.New")
	dg.Client = &http.Client{Transport: rewriteTransport{host: s.proxy.addr()}}
	dg.ShouldRetryOnRateLimit = false
	// Handlers run in one goroutine, in the order events arrive, so the
	// test observes the library's event order (the default runs each
	// handler in its own goroutine).
	dg.SyncEvents = true

	ready := make(chan *discordgo.Ready, 4)
	guilds := make(chan *discordgo.GuildCreate, 16)
	creates := make(chan *discordgo.MessageCreate, 64)
	updates := make(chan *discordgo.MessageUpdate, 16)
	deletes := make(chan *discordgo.MessageDelete, 16)
	resumed := make(chan *discordgo.Resumed, 4)
	dg.AddHandler(func(_ *discordgo.Session, e *discordgo.Ready) { ready <- e })
	dg.AddHandler(func(_ *discordgo.Session, e *discordgo.GuildCreate) { guilds <- e })
	dg.AddHandler(func(_ *discordgo.Session, e *discordgo.MessageCreate) { creates <- e })
	dg.AddHandler(func(_ *discordgo.Session, e *discordgo.MessageUpdate) { updates <- e })
	dg.AddHandler(func(_ *discordgo.Session, e *discordgo.MessageDelete) { deletes <- e })
	dg.AddHandler(func(_ *discordgo.Session, e *discordgo.Resumed) { resumed <- e })
	must(t, dg.Open(), "open gateway")
	t.Cleanup(func() { dg.Close() })

	r := waitFor(t, ready, "READY", func(*discordgo.Ready) bool { return true })
	if r.User == nil || r.User.ID != w.botID {
		t.Fatalf("READY user = %+v, want id %s", r.User, w.botID)
	}
	if r.SessionID == "" {
		t.Fatal("READY without session_id")
	}
	waitFor(t, guilds, "GUILD_CREATE", func(g *discordgo.GuildCreate) bool { return g.ID == w.guildID })
	st, err := dg.State.Guild(w.guildID)
	must(t, err, "state guild")
	found := false
	for _, c := range st.Channels {
		found = found || c.ID == w.channel
	}
	if !found {
		t.Fatalf("state of guild %s lacks channel %s: %+v", w.guildID, w.channel, st.Channels)
	}
	if _, err := dg.State.Channel(w.channel); err != nil {
		t.Fatalf("state channel: %v", err)
	}

	// A user's REST post reaches the bot.
	var posted struct {
		ID string `json:"id"`
	}
	w.owner.do("POST", "/channels/"+w.channel+"/messages", map[string]any{"content": "ping from owner"}, &posted)
	got := waitFor(t, creates, "MESSAGE_CREATE ping", func(m *discordgo.MessageCreate) bool { return m.ID == posted.ID })
	if got.Content != "ping from owner" || got.GuildID != w.guildID || got.Author == nil {
		t.Fatalf("MESSAGE_CREATE = %+v", got.Message)
	}

	// The bot replies, edits and deletes with the library's own calls.
	reply, err := dg.ChannelMessageSendReply(w.channel, "pong", got.Reference())
	must(t, err, "reply")
	if reply.MessageReference == nil || reply.MessageReference.MessageID != posted.ID || reply.Type != discordgo.MessageTypeReply {
		t.Fatalf("reply = %+v (reference %+v)", reply, reply.MessageReference)
	}
	waitFor(t, creates, "MESSAGE_CREATE reply", func(m *discordgo.MessageCreate) bool { return m.ID == reply.ID })
	edited, err := dg.ChannelMessageEdit(w.channel, reply.ID, "pong (edited)")
	must(t, err, "edit")
	if edited.Content != "pong (edited)" || edited.EditedTimestamp == nil {
		t.Fatalf("edited = %+v", edited)
	}
	up := waitFor(t, updates, "MESSAGE_UPDATE", func(m *discordgo.MessageUpdate) bool { return m.ID == reply.ID })
	if up.Content != "pong (edited)" {
		t.Fatalf("MESSAGE_UPDATE content %q", up.Content)
	}
	must(t, dg.ChannelMessageDelete(w.channel, reply.ID), "delete")
	waitFor(t, deletes, "MESSAGE_DELETE", func(m *discordgo.MessageDelete) bool { return m.ID == reply.ID })
	var history []struct {
		ID string `json:"id"`
	}
	w.owner.do("GET", "/channels/"+w.channel+"/messages?limit=10", nil, &history)
	for _, m := range history {
		if m.ID == reply.ID {
			t.Fatalf("deleted reply %s still in history", reply.ID)
		}
	}

	// Cut every socket; messages posted while the bot is away arrive after
	// it resumes, in order, none missing.
	if n := s.proxy.cut(); n == 0 {
		t.Fatal("proxy had no connection to cut")
	}
	var want []string
	for i := 0; i < 5; i++ {
		var m struct {
			ID string `json:"id"`
		}
		w.owner.do("POST", "/channels/"+w.channel+"/messages", map[string]any{"content": "while away"}, &m)
		want = append(want, m.ID)
	}
	waitFor(t, resumed, "RESUMED", func(*discordgo.Resumed) bool { return true })
	for i, id := range want {
		m := waitFor(t, creates, "replayed MESSAGE_CREATE", func(*discordgo.MessageCreate) bool { return true })
		if m.ID != id {
			t.Fatalf("after resume event %d is message %s, want %s (order or gap)", i, m.ID, id)
		}
	}
	select {
	case e := <-ready:
		t.Fatalf("bot re-identified (READY %s) instead of resuming", e.SessionID)
	default:
	}
}
