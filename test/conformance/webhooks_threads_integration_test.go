//go:build integration

package conformance

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
)

// libEvent is one line printed by the logging and ticket bots (js/logging.js,
// js/ticket.js, py/logging_bot.py, py/ticket.py).
type libEvent struct {
	Ev          string   `json:"ev"`
	ID          string   `json:"id"`
	Token       bool     `json:"token"`
	Channel     string   `json:"channel"`
	Count       int      `json:"count"`
	IDs         []string `json:"ids"`
	Webhook     string   `json:"webhook"`
	Author      string   `json:"author"`
	Embeds      int      `json:"embeds"`
	Attachments int      `json:"attachments"`
	URL         string   `json:"url"`
	Name        string   `json:"name"`
	Content     string   `json:"content"`
	Target      string   `json:"target"`
	Executor    string   `json:"executor"`
	Type        int      `json:"type"`
	Parent      string   `json:"parent"`
	Invitable   bool     `json:"invitable"`
	User        string   `json:"user"`
	Message     string   `json:"message"`
	Archived    bool     `json:"archived"`
	Created     bool     `json:"created"`
}

// step waits for the bot's event name and fails at once, with the
// library's own message, when the bot reports an error instead.
func step(t *testing.T, events <-chan libEvent, name string) libEvent {
	t.Helper()
	return waitFor(t, events, name, func(e libEvent) bool {
		if e.Ev == "error" {
			t.Fatalf("bot error before %s: %s", name, e.Message)
		}
		return e.Ev == name
	})
}

// Permissions the logging and ticket bots hold.
const (
	permManageWebhooks = 1 << 29
	permViewAuditLog   = 1 << 7
	permAttachFiles    = 1 << 15
	permEmbedLinks     = 1 << 14
	permManageThreads  = 1 << 34
	permPublicThreads  = 1 << 35
	permPrivateThreads = 1 << 36
	permSendInThreads  = 1 << 38

	botPerms = permViewChannel | permSendMessages | permReadHistory | permManageWebhooks | permViewAuditLog |
		permAttachFiles | permEmbedLinks | permManageThreads | permPublicThreads | permPrivateThreads | permSendInThreads
)

// checkLogging drives a logging bot (either library) through a webhook's
// whole life and checks what the libraries read back against REST.
func checkLogging(t *testing.T, w world, events <-chan libEvent) {
	step(t, events, "ready")
	w.owner.do("POST", "/channels/"+w.channel+"/messages", map[string]any{"content": "log deploy finished"}, &map[string]any{})
	created := step(t, events, "webhookCreated")
	if !created.Token || created.Channel != w.channel {
		t.Fatalf("created webhook as the library read it: %+v", created)
	}
	if e := step(t, events, "webhooksListed"); e.Count != 1 || !slices.Contains(e.IDs, created.ID) {
		t.Fatalf("listed webhooks: %+v", e)
	}
	sent := step(t, events, "webhookSent")
	if sent.Webhook != created.ID || sent.Author != "Audit Trail" || sent.Embeds != 1 || sent.Attachments != 1 || sent.Name != "log.txt" {
		t.Fatalf("webhook message as the library read it: %+v", sent)
	}
	// The attachment URL the library got serves the file.
	resp, err := http.Get(sent.URL)
	must(t, err, "fetch attachment")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "log line\n" {
		t.Fatalf("attachment %s: %d %q", sent.URL, resp.StatusCode, body)
	}
	if e := step(t, events, "webhookEdited"); e.ID != sent.ID || e.Content != "edited: deploy finished" {
		t.Fatalf("edited: %+v", e)
	}
	step(t, events, "webhookMessageDeleted")
	// Seven executions at once through the library, past the webhook's
	// 5 per 2 s: every one delivered, as seven messages.
	if e := step(t, events, "webhookBurst"); e.Count != 7 || len(e.IDs) != 7 {
		t.Fatalf("webhook burst: %+v", e)
	}
	if e := step(t, events, "webhookRenamed"); e.Name != "Logger 2" {
		t.Fatalf("renamed: %+v", e)
	}
	step(t, events, "webhookDeleted")
	if e := step(t, events, "audit"); e.Count < 1 || e.Target != created.ID || e.Executor != w.botID {
		t.Fatalf("audit log: %+v", e)
	}
	if code := w.owner.do("GET", "/webhooks/"+created.ID, nil, nil); code != 404 {
		t.Fatalf("deleted webhook: GET = %d", code)
	}
	var history []struct {
		ID string `json:"id"`
	}
	w.owner.do("GET", "/channels/"+w.channel+"/messages?limit=50", nil, &history)
	for _, m := range history {
		if m.ID == sent.ID {
			t.Fatal("the deleted webhook message is still in the history")
		}
	}
}

// checkTicket drives a ticket bot (either library): a customer asks for a
// ticket; the bot opens a private thread only they (and moderators) see.
func checkTicket(t *testing.T, s *server, w world, tag string, events <-chan libEvent, created <-chan libEvent) {
	step(t, events, "ready")
	customer, customerID := s.register("customer-" + tag)
	bystander, _ := s.register("bystander-" + tag)
	var inv struct {
		Code string `json:"code"`
	}
	w.owner.do("POST", "/channels/"+w.channel+"/invites", map[string]any{}, &inv)
	customer.do("POST", "/invites/"+inv.Code, map[string]any{}, &map[string]any{})
	bystander.do("POST", "/invites/"+inv.Code, map[string]any{}, &map[string]any{})
	var ask struct {
		ID string `json:"id"`
	}
	customer.do("POST", "/channels/"+w.channel+"/messages", map[string]any{"content": "ticket"}, &ask)

	th := step(t, events, "threadCreated")
	if th.Type != 12 || th.Parent != w.channel || th.Invitable {
		t.Fatalf("ticket thread as the library read it: %+v", th)
	}
	if e := step(t, events, "memberAdded"); e.User != customerID {
		t.Fatalf("member added: %+v", e)
	}
	if e := step(t, events, "threadMessage"); e.Channel != th.ID {
		t.Fatalf("thread message: %+v", e)
	}
	pub := step(t, events, "startedFromMessage")
	if pub.ID != ask.ID || pub.Type != 11 {
		t.Fatalf("thread from the message: %+v", pub)
	}
	if e := step(t, events, "active"); !slices.Contains(e.IDs, th.ID) || !slices.Contains(e.IDs, pub.ID) {
		t.Fatalf("active threads: %+v", e)
	}
	if e := step(t, events, "archived"); !e.Archived {
		t.Fatalf("archived: %+v", e)
	}
	if e := step(t, events, "archivedList"); !slices.Contains(e.IDs, th.ID) {
		t.Fatalf("archived private threads: %+v", e)
	}
	// Over REST: the customer reads the ticket, the bystander does not
	// even see it.
	var msgs []struct {
		Content string `json:"content"`
	}
	customer.do("GET", "/channels/"+th.ID+"/messages", nil, &msgs)
	if len(msgs) != 1 {
		t.Fatalf("ticket history for the customer: %+v", msgs)
	}
	if code := bystander.do("GET", "/channels/"+th.ID+"/messages", nil, nil); code != 403 {
		t.Fatalf("bystander reads the private ticket: %d", code)
	}
	if code := bystander.do("GET", "/channels/"+pub.ID, nil, nil); code != 200 {
		t.Fatalf("bystander cannot see the public thread: %d", code)
	}
	// The library tells the bot about a thread someone else opens
	// (THREAD_CREATE with newly_created: discord.py's on_thread_create,
	// discord.js's ThreadCreate with newlyCreated). Both libraries emit
	// it only for a thread they have not cached yet, so the bot's own
	// threads, which the REST answer may cache first, would race.
	var other struct {
		ID string `json:"id"`
	}
	customer.do("POST", "/channels/"+w.channel+"/threads", map[string]any{"name": "question", "type": 11}, &other)
	waitFor(t, created, "THREAD_CREATE of the customer's thread", func(e libEvent) bool { return e.ID == other.ID })
}

// createdTap collects the bot's threadCreateEvent lines.
func createdTap() (func(libEvent), <-chan libEvent) {
	ch := make(chan libEvent, 64)
	return func(e libEvent) {
		if e.Ev == "threadCreateEvent" && e.Created {
			select {
			case ch <- e:
			default:
			}
		}
	}, ch
}

// botWorld is a world whose bot account holds botPerms through a role.
func botWorld(s *server, tag string) world {
	w := newWorld(s, tag)
	var role struct {
		ID string `json:"id"`
	}
	w.owner.do("POST", "/guilds/"+w.guildID+"/roles", map[string]any{"name": "helper", "permissions": fmt.Sprint(uint64(botPerms))}, &role)
	w.owner.do("PUT", "/guilds/"+w.guildID+"/members/"+w.botID+"/roles/"+role.ID, nil, nil)
	return w
}

// appWorld is a world whose bot is a real application installed with
// botPerms (what discord.py bots are).
func appWorld(t *testing.T, s *server, tag string) world {
	owner, _ := s.register("owner-" + tag)
	guildID, channelID := newGuild(t, owner, "discord.py "+tag)
	a := createApp(t, s, owner, tag)
	owner.do("PATCH", "/applications/"+a.ID, map[string]any{"flags": flagGatewayMessageContent}, &map[string]any{})
	install(t, owner, a, guildID, botPerms)
	return world{owner: owner, botID: a.BotID, botToken: a.Token, guildID: guildID, channel: channelID}
}

// TestDiscordJSLoggingBot runs js/logging.js, an unmodified discord.js 14
// bot, through channel webhooks with an attachment and the audit log.
func TestDiscordJSLoggingBot(t *testing.T) {
	dir := jsDir(t)
	s := startServer(t)
	w := botWorld(s, "djslog")
	events := startNodeBot[libEvent](t, dir, "logging.js",
		[]string{"CONCORD_API=http://" + s.proxy.addr() + "/api", "CONCORD_TOKEN=" + w.botToken}, nil)
	checkLogging(t, w, events)
}

// TestDiscordPyLoggingBot runs py/logging_bot.py, an unmodified discord.py
// 2 bot of a real application, through the same steps.
func TestDiscordPyLoggingBot(t *testing.T) {
	py := pythonBin(t)
	s := startServer(t)
	w := appWorld(t, s, "dpylog")
	dir, err := filepath.Abs("py")
	must(t, err, "py dir")
	events := startBot[libEvent](t, "discord.py", dir, []string{py, "logging_bot.py"},
		[]string{"CONCORD_HOST=" + s.proxy.addr(), "CONCORD_TOKEN=" + w.botToken}, nil)
	checkLogging(t, w, events)
}

// TestDiscordJSTicketBot runs js/ticket.js, an unmodified discord.js 14
// bot, through private and public threads.
func TestDiscordJSTicketBot(t *testing.T) {
	dir := jsDir(t)
	s := startServer(t)
	w := botWorld(s, "djsticket")
	tap, created := createdTap()
	events := startNodeBot[libEvent](t, dir, "ticket.js",
		[]string{"CONCORD_API=http://" + s.proxy.addr() + "/api", "CONCORD_TOKEN=" + w.botToken}, tap)
	checkTicket(t, s, w, "djsticket", events, created)
}

// TestDiscordPyTicketBot runs py/ticket.py, an unmodified discord.py 2 bot
// of a real application, through the same steps.
func TestDiscordPyTicketBot(t *testing.T) {
	py := pythonBin(t)
	s := startServer(t)
	w := appWorld(t, s, "dpyticket")
	dir, err := filepath.Abs("py")
	must(t, err, "py dir")
	tap, created := createdTap()
	events := startBot[libEvent](t, "discord.py", dir, []string{py, "ticket.py"},
		[]string{"CONCORD_HOST=" + s.proxy.addr(), "CONCORD_TOKEN=" + w.botToken}, tap)
	checkTicket(t, s, w, "dpyticket", events, created)
}

// imgEvent is one line printed by js/image.js.
type imgEvent struct {
	Ev      string `json:"ev"`
	ID      string `json:"id"`
	Cat     string `json:"cat"`
	Cats    string `json:"cats"`
	Count   int    `json:"count"`
	URL     string `json:"url"`
	Type    string `json:"type"`
	Message string `json:"message"`
}

// imageWorld is a guild with a member and an application installed with
// ATTACH_FILES.
func imageWorld(t *testing.T, s *server, tag string) (member *rest, a app, guildID, channelID string) {
	owner, _ := s.register("img-owner-" + tag)
	member, _ = s.register("img-member-" + tag)
	guildID, channelID = newGuild(t, owner, "Images "+tag)
	var inv struct {
		Code string `json:"code"`
	}
	owner.do("POST", "/channels/"+channelID+"/invites", map[string]any{}, &inv)
	member.do("POST", "/invites/"+inv.Code, map[string]any{}, &map[string]any{})
	a = createApp(t, s, owner, "Imager "+tag)
	install(t, owner, a, guildID, permViewChannel|permSendMessages|permReadHistory|permAttachFiles)
	return member, a, guildID, channelID
}

// checkImage drives an image bot (either library): a member invokes its
// slash commands; the answers carry files the library reads back and
// that the signed URLs serve.
func checkImage(t *testing.T, member *rest, a app, guildID, channelID string, events <-chan imgEvent) {
	next := func(name string) imgEvent {
		t.Helper()
		return waitFor(t, events, name, func(e imgEvent) bool {
			if e.Ev == "error" {
				t.Fatalf("bot error before %s: %s", name, e.Message)
			}
			return e.Ev == name
		})
	}
	next("ready")
	reg := next("registered")
	if reg.Cat == "" || reg.Cats == "" {
		t.Fatalf("registered: %+v", reg)
	}
	invoke := func(id, name string) {
		if code := member.do("POST", "/interactions", map[string]any{
			"type": 2, "application_id": a.ID, "guild_id": guildID, "channel_id": channelID,
			"data": map[string]any{"id": id, "name": name, "type": 1},
		}, nil); code != http.StatusNoContent {
			t.Fatalf("invoke /%s: %d", name, code)
		}
	}
	png := func(e imgEvent) {
		t.Helper()
		if e.Count != 1 || e.Type != "image/png" {
			t.Fatalf("%s read back: %+v", e.Ev, e)
		}
		resp, err := http.Get(e.URL)
		must(t, err, "fetch "+e.URL)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/png" || len(b) != 29 {
			t.Fatalf("fetch %s: %d %s %d bytes", e.URL, resp.StatusCode, resp.Header.Get("Content-Type"), len(b))
		}
	}
	invoke(reg.Cat, "cat")
	png(next("replied"))
	invoke(reg.Cats, "cats")
	png(next("edited"))
	png(next("followup"))
}

// TestDiscordJSImageBot runs js/image.js, an unmodified discord.js 14
// application bot, whose slash commands answer with files: in the
// response, in the edit of a deferred response and in a followup.
func TestDiscordJSImageBot(t *testing.T) {
	dir := jsDir(t)
	s := startServer(t)
	member, a, guildID, channelID := imageWorld(t, s, "djs")
	events := startNodeBot[imgEvent](t, dir, "image.js", []string{"CONCORD_API=http://" + s.proxy.addr() + "/api",
		"CONCORD_TOKEN=" + a.Token, "CONCORD_GUILD=" + guildID}, nil)
	checkImage(t, member, a, guildID, channelID, events)
}

// TestDiscordPyImageBot runs py/image.py, an unmodified discord.py 2 bot
// with an app command tree, through the same steps.
func TestDiscordPyImageBot(t *testing.T) {
	py := pythonBin(t)
	s := startServer(t)
	member, a, guildID, channelID := imageWorld(t, s, "dpy")
	dir, err := filepath.Abs("py")
	must(t, err, "py dir")
	events := startBot[imgEvent](t, "discord.py", dir, []string{py, "image.py"},
		[]string{"CONCORD_HOST=" + s.proxy.addr(), "CONCORD_TOKEN=" + a.Token, "CONCORD_GUILD=" + guildID}, nil)
	checkImage(t, member, a, guildID, channelID, events)
}
