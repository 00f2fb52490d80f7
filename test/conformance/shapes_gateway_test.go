package conformance

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/gwtest"
)

// Gateway intents these tests ask for.
const (
	intentGuilds                 = 1 << 0
	intentGuildMessages          = 1 << 9
	intentGuildMessageReactions  = 1 << 10
	intentDirectMessages         = 1 << 12
	intentDirectMessageReactions = 1 << 13
	intentMessageContent         = 1 << 15
)

// dialGateway opens a real gateway session for token through the proxy
// and waits for READY.
func dialGateway(t *testing.T, s *server, name, token string, intents uint64) *gwtest.Conn {
	t.Helper()
	c, err := gwtest.Dial(gwtest.URL(s.proxy.addr()), token, gwtest.Options{Name: name, Intents: intents, Timeout: 30 * time.Second})
	must(t, err, "dial gateway as "+name)
	t.Cleanup(c.Close)
	awaitFrame(t, c, "READY", func(json.RawMessage) bool { return true })
	return c
}

// awaitFrame waits for a dispatch of type typ whose payload satisfies
// match, and returns it.
func awaitFrame(t *testing.T, c *gwtest.Conn, typ string, match func(json.RawMessage) bool) json.RawMessage {
	t.Helper()
	var got json.RawMessage
	err := c.Await(typ, 30*time.Second, func(frames []gwtest.Frame) bool {
		for _, f := range frames {
			if f.Type == typ && match(f.D) {
				got = f.D
				return true
			}
		}
		return false
	})
	must(t, err, "await "+typ)
	return got
}

// gwMessage is the part of a message payload these tests read.
type gwMessage struct {
	ID               string `json:"id"`
	ChannelID        string `json:"channel_id"`
	GuildID          string `json:"guild_id"`
	Type             int    `json:"type"`
	Flags            int    `json:"flags"`
	Content          string `json:"content"`
	MessageReference *struct {
		MessageID string `json:"message_id"`
		ChannelID string `json:"channel_id"`
		GuildID   string `json:"guild_id"`
	} `json:"message_reference"`
	ReferencedMessage *struct {
		ID string `json:"id"`
	} `json:"referenced_message"`
	Thread *struct {
		ID       string `json:"id"`
		Type     int    `json:"type"`
		ParentID string `json:"parent_id"`
	} `json:"thread"`
}

func decodeMessage(raw json.RawMessage) gwMessage {
	var m gwMessage
	_ = json.Unmarshal(raw, &m)
	return m
}

// TestThreadShapesOverGateway checks, through a real gateway session, the
// shapes Discord sends around threads: THREAD_CREATE with newly_created,
// the starter message's MESSAGE_UPDATE carrying its thread and
// HAS_THREAD, the THREAD_STARTER_MESSAGE (21) that opens the thread, the
// THREAD_CREATED (18) message a standalone public thread leaves in its
// parent — and that none of it, nor a reaction, reaches a member from a
// channel they cannot see.
func TestThreadShapesOverGateway(t *testing.T) {
	s := startServer(t)
	owner, _ := s.register("owner-shapes")
	member, _ := s.register("member-shapes")
	guildID, general := newGuild(t, owner, "thread shapes")
	var staff struct {
		ID string `json:"id"`
	}
	owner.do("POST", "/guilds/"+guildID+"/channels", map[string]any{"name": "staff", "type": 0,
		"permission_overwrites": []map[string]any{{"id": guildID, "type": 0, "deny": "1024"}}}, &staff)
	var inv struct {
		Code string `json:"code"`
	}
	owner.do("POST", "/channels/"+general+"/invites", map[string]any{}, &inv)
	member.do("POST", "/invites/"+inv.Code, map[string]any{}, &map[string]any{})
	gw := dialGateway(t, s, "member", member.token, intentGuilds|intentGuildMessages|intentMessageContent|intentGuildMessageReactions)

	var starter gwMessage
	owner.do("POST", "/channels/"+general+"/messages", map[string]any{"content": "let's talk"}, &starter)
	var th struct {
		ID string `json:"id"`
	}
	owner.do("POST", "/channels/"+general+"/messages/"+starter.ID+"/threads", map[string]any{"name": "talk"}, &th)
	created := awaitFrame(t, gw, "THREAD_CREATE", func(d json.RawMessage) bool { return strings.Contains(string(d), th.ID) })
	var tc struct {
		ID           string `json:"id"`
		Type         int    `json:"type"`
		ParentID     string `json:"parent_id"`
		NewlyCreated bool   `json:"newly_created"`
	}
	if json.Unmarshal(created, &tc) != nil || tc.ID != th.ID || tc.Type != 11 || tc.ParentID != general || !tc.NewlyCreated {
		t.Fatalf("THREAD_CREATE = %s", created)
	}
	up := decodeMessage(awaitFrame(t, gw, "MESSAGE_UPDATE", func(d json.RawMessage) bool { return decodeMessage(d).ID == starter.ID }))
	if up.Flags&(1<<5) == 0 || up.Thread == nil || up.Thread.ID != th.ID || up.Thread.ParentID != general {
		t.Fatalf("starter MESSAGE_UPDATE = %+v", up)
	}
	first := decodeMessage(awaitFrame(t, gw, "MESSAGE_CREATE", func(d json.RawMessage) bool { return decodeMessage(d).ChannelID == th.ID }))
	if first.Type != 21 || first.MessageReference == nil || first.MessageReference.MessageID != starter.ID ||
		first.MessageReference.ChannelID != general || first.ReferencedMessage == nil || first.ReferencedMessage.ID != starter.ID {
		t.Fatalf("THREAD_STARTER_MESSAGE = %+v", first)
	}

	var standalone struct {
		ID string `json:"id"`
	}
	owner.do("POST", "/channels/"+general+"/threads", map[string]any{"name": "standalone", "type": 11}, &standalone)
	sys := decodeMessage(awaitFrame(t, gw, "MESSAGE_CREATE", func(d json.RawMessage) bool { return decodeMessage(d).Type == 18 }))
	if sys.ChannelID != general || sys.Content != "standalone" || sys.MessageReference == nil ||
		sys.MessageReference.ChannelID != standalone.ID || sys.MessageReference.MessageID != "" {
		t.Fatalf("THREAD_CREATED = %+v", sys)
	}

	// The hidden channel: a message, a thread from it, a standalone
	// thread and a reaction there, then a barrier message in general.
	var secret gwMessage
	owner.do("POST", "/channels/"+staff.ID+"/messages", map[string]any{"content": "secret"}, &secret)
	owner.do("POST", "/channels/"+staff.ID+"/messages/"+secret.ID+"/threads", map[string]any{"name": "secret thread"}, &map[string]any{})
	owner.do("POST", "/channels/"+staff.ID+"/threads", map[string]any{"name": "secret standalone", "type": 11}, &map[string]any{})
	owner.do("PUT", "/channels/"+staff.ID+"/messages/"+secret.ID+"/reactions/%F0%9F%91%8D/@me", nil, nil)
	var barrier gwMessage
	owner.do("POST", "/channels/"+general+"/messages", map[string]any{"content": "barrier"}, &barrier)
	awaitFrame(t, gw, "MESSAGE_CREATE", func(d json.RawMessage) bool { return decodeMessage(d).ID == barrier.ID })
	for _, f := range gw.Frames() {
		d := string(f.D)
		if strings.Contains(d, staff.ID) || strings.Contains(d, secret.ID) || strings.Contains(d, "secret") {
			t.Fatalf("the member got %s from a channel they cannot see: %s", f.Type, d)
		}
	}
}

// TestDirectMessageReactionsOverGateway checks reactions in DMs with bots:
// MESSAGE_REACTION_ADD and _REMOVE (without guild_id) reach a bot whose
// session asked for DIRECT_MESSAGE_REACTIONS, and not a bot whose session
// asked only for DIRECT_MESSAGES (intents filter bot sessions, as on
// Discord).
func TestDirectMessageReactionsOverGateway(t *testing.T) {
	s := startServer(t)
	owner, _ := s.register("owner-dmreact")
	bob, bobID := s.register("bob-dmreact")
	guildID, general := newGuild(t, owner, "dm reactions")
	var inv struct {
		Code string `json:"code"`
	}
	owner.do("POST", "/channels/"+general+"/invites", map[string]any{}, &inv)
	bob.do("POST", "/invites/"+inv.Code, map[string]any{}, &map[string]any{})
	// dmWith installs a bot, connects it with intents and returns its DM
	// with bob holding one message of the bot's.
	dmWith := func(name string, intents uint64) (conn *gwtest.Conn, dm, msg string) {
		a := createApp(t, s, owner, name)
		install(t, owner, a, guildID, permViewChannel|permSendMessages|permReadHistory)
		conn = dialGateway(t, s, name, a.Token, intents)
		var ch struct {
			ID string `json:"id"`
		}
		bob.do("POST", "/users/@me/channels", map[string]any{"recipient_id": a.BotID}, &ch)
		var m gwMessage
		a.bot.do("POST", "/channels/"+ch.ID+"/messages", map[string]any{"content": "react to me"}, &m)
		return conn, ch.ID, m.ID
	}
	withIntent, dm, msg := dmWith("dmreact-yes", intentDirectMessages|intentDirectMessageReactions)
	without, dmNo, msgNo := dmWith("dmreact-no", intentDirectMessages)

	path := "/channels/" + dm + "/messages/" + msg + "/reactions/%F0%9F%8E%89/@me"
	if code := bob.do("PUT", path, nil, nil); code != 204 {
		t.Fatalf("DM reaction: status %d", code)
	}
	var ev struct {
		UserID    string  `json:"user_id"`
		ChannelID string  `json:"channel_id"`
		MessageID string  `json:"message_id"`
		GuildID   *string `json:"guild_id"`
		Emoji     struct {
			Name string `json:"name"`
		} `json:"emoji"`
	}
	raw := awaitFrame(t, withIntent, "MESSAGE_REACTION_ADD", func(json.RawMessage) bool { return true })
	if json.Unmarshal(raw, &ev) != nil || ev.UserID != bobID || ev.ChannelID != dm || ev.MessageID != msg || ev.GuildID != nil || ev.Emoji.Name != "🎉" {
		t.Fatalf("DM MESSAGE_REACTION_ADD = %s", raw)
	}
	var got struct {
		Reactions []struct {
			Count int  `json:"count"`
			Me    bool `json:"me"`
		} `json:"reactions"`
	}
	bob.do("GET", "/channels/"+dm+"/messages/"+msg, nil, &got)
	if len(got.Reactions) != 1 || got.Reactions[0].Count != 1 || !got.Reactions[0].Me {
		t.Fatalf("DM message reactions as bob reads them: %+v", got.Reactions)
	}
	if code := bob.do("DELETE", path, nil, nil); code != 204 {
		t.Fatalf("DM reaction removal: status %d", code)
	}
	awaitFrame(t, withIntent, "MESSAGE_REACTION_REMOVE", func(d json.RawMessage) bool { return strings.Contains(string(d), msg) })

	// The bot without the intent: bob reacts to its message, then sends
	// a DM, the barrier after anything the reaction sent it.
	if code := bob.do("PUT", "/channels/"+dmNo+"/messages/"+msgNo+"/reactions/%F0%9F%8E%89/@me", nil, nil); code != 204 {
		t.Fatalf("DM reaction: status %d", code)
	}
	var after gwMessage
	bob.do("POST", "/channels/"+dmNo+"/messages", map[string]any{"content": "after"}, &after)
	awaitFrame(t, without, "MESSAGE_CREATE", func(d json.RawMessage) bool { return decodeMessage(d).ID == after.ID })
	for _, f := range without.Frames() {
		if strings.HasPrefix(f.Type, "MESSAGE_REACTION") {
			t.Fatalf("a session without DIRECT_MESSAGE_REACTIONS got %s: %s", f.Type, f.D)
		}
	}
}
