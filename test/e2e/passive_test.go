package e2e

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/concord-chat/concord/internal/gwtest"
	"github.com/concord-chat/concord/internal/resttest"
	"github.com/concord-chat/concord/runtime/domain/permissions"
)

// passiveChannels decodes PASSIVE_UPDATE_V1's `d`.
type passiveChannels struct {
	GuildID  string `json:"guild_id"`
	Channels []struct {
		ID               string  `json:"id"`
		LastMessageID    *string `json:"last_message_id"`
		LastPinTimestamp *string `json:"last_pin_timestamp"`
	} `json:"channels"`
	VoiceStates []json.RawMessage `json:"voice_states"`
	Members     []json.RawMessage `json:"members"`
}

// idIs matches a dispatch whose `d` has the given id (messages) or
// message_id (reactions).
func idIs(id string) func(gwtest.Frame) bool {
	return func(f gwtest.Frame) bool {
		var d struct {
			ID        string `json:"id"`
			MessageID string `json:"message_id"`
		}
		_ = json.Unmarshal(f.D, &d)
		return d.ID == id || d.MessageID == id
	}
}

// channelIs matches a dispatch whose `d` has channel_id.
func channelIs(id string) func(gwtest.Frame) bool {
	return func(f gwtest.Frame) bool {
		var d struct {
			ChannelID string `json:"channel_id"`
		}
		_ = json.Unmarshal(f.D, &d)
		return d.ChannelID == id
	}
}

// await waits for a dispatch of typ matching m and returns its index in
// c's frames.
func await(t *testing.T, c *gwtest.Conn, what, typ string, m func(gwtest.Frame) bool) int {
	t.Helper()
	at := -1
	err := c.Await(what, 20*time.Second, func(fs []gwtest.Frame) bool {
		for i, f := range fs {
			if f.Type == typ && (m == nil || m(f)) {
				at = i
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// none fails if any of c's frames before index end is typ and matches m.
func none(t *testing.T, c *gwtest.Conn, what string, end int, typ string, m func(gwtest.Frame) bool) {
	t.Helper()
	for _, f := range c.Frames()[:end] {
		if f.Type == typ && (m == nil || m(f)) {
			t.Fatalf("%s: got %s %s", what, typ, f.D)
		}
	}
}

// passiveUpdates decodes c's PASSIVE_UPDATE_V1 dispatches.
func passiveUpdates(t *testing.T, c *gwtest.Conn) ([]passiveChannels, []time.Time) {
	t.Helper()
	var out []passiveChannels
	var at []time.Time
	for _, f := range c.Frames() {
		if f.Type != "PASSIVE_UPDATE_V1" {
			continue
		}
		var u passiveChannels
		if err := json.Unmarshal(f.D, &u); err != nil {
			t.Fatalf("PASSIVE_UPDATE_V1 %s: %v", f.D, err)
		}
		if u.VoiceStates == nil || u.Members == nil {
			t.Fatalf("PASSIVE_UPDATE_V1 without voice_states or members arrays: %s", f.D)
		}
		out = append(out, u)
		at = append(at, f.At)
	}
	return out, at
}

// names reports whether an update lists channel with last_message_id
// last ("" for any).
func names(u passiveChannels, channel, last string) bool {
	for _, c := range u.Channels {
		if c.ID == channel && (last == "" || (c.LastMessageID != nil && *c.LastMessageID == last)) {
			return true
		}
	}
	return false
}

// TestPassiveSessions checks the passive-session contract (docs/api.md,
// "Passive sessions") against a real `concord dev` with raw WebSocket
// clients, in a guild of 52 members: alice (large_threshold 50, so
// passive), carol (large_threshold 250, so the guild is small to her), a
// bot (never passive) and the owner (passive, the only passive viewer of
// a hidden channel).
func TestPassiveSessions(t *testing.T) {
	addr := freeAddr(t)
	p := startConcord(t, addr, "dev", "--http="+addr, "--data-dir="+t.TempDir(), "--log-format=json")
	if p.token == "" {
		t.Fatalf("concord dev printed no dev token; output:\n%s", p.logs())
	}
	owner := p.token
	type account struct {
		Token  string `json:"token"`
		UserID string `json:"user_id"`
	}
	register := func(name string) account {
		var a account
		resttest.Call(t, addr, "", "POST", "/auth/register", map[string]any{"username": name, "password": "correct-horse-1"}, &a)
		return a
	}
	var g, chA, chB, chC, role struct {
		ID string `json:"id"`
	}
	resttest.Call(t, addr, owner, "POST", "/guilds", map[string]string{"name": "big"}, &g)
	resttest.Call(t, addr, owner, "POST", "/guilds/"+g.ID+"/channels", map[string]any{"name": "a", "type": 0}, &chA)
	resttest.Call(t, addr, owner, "POST", "/guilds/"+g.ID+"/channels", map[string]any{"name": "b", "type": 0}, &chB)
	resttest.Call(t, addr, owner, "POST", "/guilds/"+g.ID+"/channels", map[string]any{"name": "hidden", "type": 0}, &chC)
	// Only the owner sees "hidden"; members may not use @everyone.
	resttest.Call(t, addr, owner, "PUT", "/channels/"+chC.ID+"/permissions/"+g.ID,
		map[string]any{"type": 0, "allow": "0", "deny": strconv.FormatUint(uint64(permissions.ViewChannel), 10)}, nil)
	resttest.Call(t, addr, owner, "PATCH", "/guilds/"+g.ID+"/roles/"+g.ID,
		map[string]any{"permissions": strconv.FormatUint(uint64(permissions.DefaultEveryone&^permissions.MentionEveryone), 10)}, nil)
	resttest.Call(t, addr, owner, "POST", "/guilds/"+g.ID+"/roles", map[string]any{"name": "mods", "mentionable": true}, &role)
	var inv struct {
		Code string `json:"code"`
	}
	resttest.Call(t, addr, owner, "POST", "/channels/"+chA.ID+"/invites", map[string]any{"max_uses": 0}, &inv)
	alice, bob, carol := register("alice"), register("bob"), register("carol")
	for _, a := range []account{alice, bob, carol} {
		resttest.Call(t, addr, a.Token, "POST", "/invites/"+inv.Code, map[string]any{}, nil)
	}
	// 48 more members: 52 in all, above alice's large_threshold (50)
	// and below carol's (250).
	for i := range 48 {
		resttest.Call(t, addr, register(fmt.Sprintf("filler%02d", i)).Token, "POST", "/invites/"+inv.Code, map[string]any{}, nil)
	}
	resttest.Call(t, addr, owner, "PUT", "/guilds/"+g.ID+"/members/"+alice.UserID+"/roles/"+role.ID, nil, nil)
	var app struct {
		ID    string `json:"id"`
		Token string `json:"token"`
	}
	resttest.Call(t, addr, owner, "POST", "/applications", map[string]any{"name": "passive-bot"}, &app)
	resttest.Call(t, addr, owner, "PATCH", "/applications/"+app.ID, map[string]any{"flags": 1 << 18}, nil)
	resttest.Call(t, addr, owner, "POST", "/oauth2/authorize?client_id="+app.ID+"&scope=bot&permissions=3072",
		map[string]any{"guild_id": g.ID, "permissions": "3072", "authorize": true}, nil)

	dial := func(name, token string, intents uint64, threshold int) *gwtest.Conn {
		c, err := gwtest.Dial(gwtest.URL(addr), token, gwtest.Options{Name: name, Intents: intents, LargeThreshold: threshold})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		await(t, c, name+"'s GUILD_CREATE", "GUILD_CREATE", func(f gwtest.Frame) bool { return idIs(g.ID)(f) })
		return c
	}
	const userIntents = gwtest.DefaultIntents
	as := dial("alice", alice.Token, userIntents, 0)
	cs := dial("carol", carol.Token, userIntents, 250)
	os := dial("owner", owner, userIntents, 50)
	// GUILDS, GUILD_MESSAGES, GUILD_MESSAGE_REACTIONS, GUILD_MESSAGE_TYPING,
	// DIRECT_MESSAGES, MESSAGE_CONTENT.
	bs := dial("bot", "Bot "+app.Token, 1<<0|1<<9|1<<10|1<<11|1<<12|1<<15, 0)

	send := func(token, channel, content string) string {
		var m struct {
			ID string `json:"id"`
		}
		if status, _ := post(addr, token, channel, content, &m); status != 200 {
			t.Fatalf("post in %s: %d", channel, status)
		}
		return m.ID
	}
	// marker sends alice a message that mentions her in channel and
	// returns how many frames she had once it arrived. Call it after the
	// bot, which receives everything, has the events under test: the
	// guild fanned them out before the marker, and alice's connection
	// delivers in order, so her frames before it are complete.
	marker := func(channel string) int {
		id := send(bob.Token, channel, "<@"+alice.UserID+"> marker")
		return await(t, as, "alice's marker", "MESSAGE_CREATE", idIs(id))
	}
	op14 := func(channels map[string]any) {
		if err := as.Send(map[string]any{"op": 14, "d": map[string]any{"guild_id": g.ID, "channels": channels}}); err != nil {
			t.Fatal(err)
		}
		if err := as.Settle(10 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	react := func(channel, msg string) {
		resttest.Call(t, addr, bob.Token, "PUT", "/channels/"+channel+"/messages/"+msg+"/reactions/%F0%9F%91%8D/@me", nil, nil)
		await(t, bs, "the bot's MESSAGE_REACTION_ADD", "MESSAGE_REACTION_ADD", idIs(msg))
	}
	edit := func(channel, msg string) {
		resttest.Call(t, addr, bob.Token, "PATCH", "/channels/"+channel+"/messages/"+msg, map[string]any{"content": "edited"}, nil)
		await(t, bs, "the bot's MESSAGE_UPDATE", "MESSAGE_UPDATE", idIs(msg))
	}
	del := func(channel, msg string) {
		resttest.Call(t, addr, bob.Token, "DELETE", "/channels/"+channel+"/messages/"+msg, nil, nil)
		await(t, bs, "the bot's MESSAGE_DELETE", "MESSAGE_DELETE", idIs(msg))
	}
	typing := func(channel string) {
		before := 0
		for _, f := range bs.Frames() {
			if f.Type == "TYPING_START" && channelIs(channel)(f) {
				before++
			}
		}
		resttest.Call(t, addr, bob.Token, "POST", "/channels/"+channel+"/typing", nil, nil)
		if err := bs.Await("the bot's TYPING_START", 20*time.Second, func(fs []gwtest.Frame) bool {
			n := 0
			for _, f := range fs {
				if f.Type == "TYPING_START" && channelIs(channel)(f) {
					n++
				}
			}
			return n > before
		}); err != nil {
			t.Fatal(err)
		}
	}

	// 1. No op 14 yet: alice is passive everywhere. A plain message
	// reaches carol and the bot in full and alice as PASSIVE_UPDATE_V1
	// within 5 s.
	sent := time.Now()
	m1 := send(bob.Token, chA.ID, "hello")
	await(t, cs, "carol's MESSAGE_CREATE (the guild is small for her)", "MESSAGE_CREATE", idIs(m1))
	await(t, bs, "the bot's MESSAGE_CREATE", "MESSAGE_CREATE", idIs(m1))
	i := await(t, as, "alice's PASSIVE_UPDATE_V1 for a", "PASSIVE_UPDATE_V1", func(f gwtest.Frame) bool {
		var u passiveChannels
		_ = json.Unmarshal(f.D, &u)
		return u.GuildID == g.ID && names(u, chA.ID, m1)
	})
	if d := as.Frames()[i].At.Sub(sent); d > 5*time.Second {
		t.Fatalf("PASSIVE_UPDATE_V1 came %v after the message; the contract says within 5 s", d)
	}

	// 2. Mentions reach a passive session in full, at once: her user,
	// her role, @everyone and @here by the owner (who may use them); not
	// @everyone by bob, who may not (mention_everyone false).
	mr := send(bob.Token, chB.ID, "hi <@&"+role.ID+">")
	me := send(owner, chB.ID, "@everyone news")
	mh := send(owner, chB.ID, "@here news")
	mn := send(bob.Token, chB.ID, "@everyone not allowed")
	for what, id := range map[string]string{"role": mr, "@everyone": me, "@here": mh} {
		await(t, as, "alice's MESSAGE_CREATE mentioning her "+what, "MESSAGE_CREATE", idIs(id))
	}
	await(t, bs, "the bot's MESSAGE_CREATE", "MESSAGE_CREATE", idIs(mn))
	end := marker(chB.ID) // mentions her user
	none(t, as, "@everyone by bob, who may not use it", end, "MESSAGE_CREATE", idIs(mn))
	none(t, as, "alice passive in a", end, "MESSAGE_CREATE", idIs(m1))

	// 3. Passive in b: no edits, deletes, reactions or typing there.
	edit(chB.ID, mn)
	react(chB.ID, mn)
	typing(chB.ID)
	del(chB.ID, mn)
	end = marker(chA.ID)
	for _, typ := range []string{"MESSAGE_UPDATE", "MESSAGE_REACTION_ADD", "MESSAGE_DELETE"} {
		none(t, as, "alice passive in b", end, typ, idIs(mn))
	}
	none(t, as, "alice passive in b", end, "TYPING_START", channelIs(chB.ID))

	// 4. op 14 naming a: active there, everything as today; b stays
	// passive.
	op14(map[string]any{chA.ID: [][2]int{{0, 99}}})
	ma := send(bob.Token, chA.ID, "in a")
	await(t, as, "alice's MESSAGE_CREATE in her active channel", "MESSAGE_CREATE", idIs(ma))
	edit(chA.ID, ma)
	react(chA.ID, ma)
	typing(chA.ID)
	await(t, as, "alice's MESSAGE_UPDATE in a", "MESSAGE_UPDATE", idIs(ma))
	await(t, as, "alice's MESSAGE_REACTION_ADD in a", "MESSAGE_REACTION_ADD", idIs(ma))
	await(t, as, "alice's TYPING_START in a", "TYPING_START", channelIs(chA.ID))
	del(chA.ID, ma)
	await(t, as, "alice's MESSAGE_DELETE in a", "MESSAGE_DELETE", idIs(ma))
	mb := send(bob.Token, chB.ID, "in b")
	await(t, bs, "the bot's MESSAGE_CREATE", "MESSAGE_CREATE", idIs(mb))
	end = marker(chA.ID)
	none(t, as, "alice active in a only", end, "MESSAGE_CREATE", idIs(mb))

	// 5. The latest op 14 replaces the set: b active, a passive.
	op14(map[string]any{chB.ID: [][2]int{{0, 99}}})
	mb2 := send(bob.Token, chB.ID, "in b again")
	await(t, as, "alice's MESSAGE_CREATE in b after op 14 named it", "MESSAGE_CREATE", idIs(mb2))
	ma2 := send(bob.Token, chA.ID, "in a again")
	await(t, bs, "the bot's MESSAGE_CREATE", "MESSAGE_CREATE", idIs(ma2))
	end = marker(chB.ID)
	none(t, as, "op 14 replaced a by b", end, "MESSAGE_CREATE", idIs(ma2))

	// 6. An empty channels object leaves her fully passive.
	op14(map[string]any{})
	mb3 := send(bob.Token, chB.ID, "in b, passive")
	await(t, bs, "the bot's MESSAGE_CREATE", "MESSAGE_CREATE", idIs(mb3))
	end = marker(chA.ID)
	none(t, as, "an empty op 14", end, "MESSAGE_CREATE", idIs(mb3))

	// 7. Coalescing: several messages in a and b within one interval
	// reach alice as updates at least 2 s apart, the last naming the
	// last message of each; the hidden channel, changed in the same
	// window for the owner (passive, and its only viewer), never appears
	// in hers.
	before, _ := passiveUpdates(t, as)
	var lastA, lastB string
	mc := send(owner, chC.ID, "hidden")
	for range 3 {
		lastA = send(bob.Token, chA.ID, "burst a")
		lastB = send(carol.Token, chB.ID, "burst b")
	}
	await(t, os, "the owner's PASSIVE_UPDATE_V1 for the hidden channel", "PASSIVE_UPDATE_V1", func(f gwtest.Frame) bool {
		var u passiveChannels
		_ = json.Unmarshal(f.D, &u)
		return names(u, chC.ID, mc)
	})
	err := as.Await("alice's PASSIVE_UPDATE_V1 naming the last messages of a and b", 20*time.Second, func(fs []gwtest.Frame) bool {
		var a, b bool
		for _, f := range fs {
			var u passiveChannels
			if f.Type == "PASSIVE_UPDATE_V1" && json.Unmarshal(f.D, &u) == nil {
				a = a || names(u, chA.ID, lastA)
				b = b || names(u, chB.ID, lastB)
			}
		}
		return a && b
	})
	if err != nil {
		t.Fatal(err)
	}
	ups, at := passiveUpdates(t, as)
	if len(ups)-len(before) >= 6 {
		t.Fatalf("6 messages gave %d PASSIVE_UPDATE_V1: not coalesced", len(ups)-len(before))
	}
	for k := 1; k < len(at); k++ {
		// The server starts flushes 2 s apart; loopback delivery adds
		// no more than scheduling noise, so a gap under 1.9 s means two
		// flushes closer than the contract allows.
		if gap := at[k].Sub(at[k-1]); gap < 1900*time.Millisecond {
			t.Fatalf("PASSIVE_UPDATE_V1 %d and %d came %v apart; the contract says at most every 2 s", k-1, k, gap)
		}
	}
	for _, u := range ups {
		if names(u, chC.ID, "") {
			t.Fatalf("alice's PASSIVE_UPDATE_V1 names the channel she cannot view: %+v", u)
		}
		if u.GuildID != g.ID {
			t.Fatalf("PASSIVE_UPDATE_V1 for guild %s", u.GuildID)
		}
	}

	// 8. Guild structure events arrive as today.
	resttest.Call(t, addr, owner, "PATCH", "/channels/"+chB.ID, map[string]any{"name": "b-renamed"}, nil)
	await(t, as, "alice's CHANNEL_UPDATE", "CHANNEL_UPDATE", idIs(chB.ID))
	resttest.Call(t, addr, owner, "PATCH", "/guilds/"+g.ID+"/roles/"+role.ID, map[string]any{"name": "moderators"}, nil)
	await(t, as, "alice's GUILD_ROLE_UPDATE", "GUILD_ROLE_UPDATE", nil)

	// 9. DMs are unchanged.
	var dm struct {
		ID string `json:"id"`
	}
	resttest.Call(t, addr, bob.Token, "POST", "/users/@me/channels", map[string]any{"recipient_id": alice.UserID}, &dm)
	md := send(bob.Token, dm.ID, "direct")
	await(t, as, "alice's DM", "MESSAGE_CREATE", idIs(md))

	// 10. Bots and sessions to which the guild is small get everything
	// and never a PASSIVE_UPDATE_V1.
	for _, c := range []*gwtest.Conn{bs, cs} {
		for _, id := range []string{m1, mn, mb, ma2, mb3, lastA, lastB} {
			if !slices.ContainsFunc(c.Frames(), func(f gwtest.Frame) bool { return f.Type == "MESSAGE_CREATE" && idIs(id)(f) }) {
				t.Fatalf("a session that is not passive missed message %s", id)
			}
		}
		if ups, _ := passiveUpdates(t, c); len(ups) > 0 {
			t.Fatalf("a session that is not passive got PASSIVE_UPDATE_V1: %+v", ups)
		}
	}
}
