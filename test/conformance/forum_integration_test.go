//go:build integration

package conformance

import (
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
)

// forumEvent is one line printed by js/forum.js or py/forum.py.
type forumEvent struct {
	Ev      string   `json:"ev"`
	ID      string   `json:"id"`
	Type    int      `json:"type"`
	IsForum bool     `json:"isForum"`
	Tags    []string `json:"tags"`
	Parent  string   `json:"parent"`
	Channel string   `json:"channel"`
	Content string   `json:"content"`
	// LastMessage is the post's last_message_id as the library read it.
	LastMessage string `json:"lastMessage"`
	// The starter message's files (postedFile).
	Count int    `json:"count"`
	Name  string `json:"name"`
	CType string `json:"ctype"`
	URL   string `json:"url"`
}

// forumWorld is a guild with a forum of two tags and an application bot
// allowed to post there.
func forumWorld(t *testing.T, s *server, tag string) (owner *rest, token, forumID, bugID string) {
	t.Helper()
	owner, _ = s.register("owner-" + tag)
	guildID, _ := newGuild(t, owner, "forum "+tag)
	a := createApp(t, s, owner, tag)
	const sendInThreads = 1 << 38
	install(t, owner, a, guildID, permViewChannel|permSendMessages|permReadHistory|sendInThreads|permAttachFiles)
	var forum struct {
		ID            string `json:"id"`
		AvailableTags []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"available_tags"`
	}
	owner.do("POST", "/guilds/"+guildID+"/channels", map[string]any{"name": "help", "type": 15,
		"available_tags": []map[string]any{{"name": "bug", "emoji_name": "🐛"}, {"name": "staff", "moderated": true}}}, &forum)
	if len(forum.AvailableTags) != 2 || forum.AvailableTags[0].Name != "bug" {
		t.Fatalf("forum = %+v", forum)
	}
	return owner, a.Token, forum.ID, forum.AvailableTags[0].ID
}

// checkForum drives a forum bot of either library: the forum and its tags
// as the library cached them, a tagged post whose starter message has the
// post's id, a reply, and a retag; then the owner reads it all back.
func checkForum(t *testing.T, owner *rest, forumID, bugID string, events <-chan forumEvent) {
	step := func(name string) forumEvent {
		t.Helper()
		return waitFor(t, events, name, func(e forumEvent) bool { return e.Ev == name })
	}
	step("ready")
	if e := step("forum"); e.ID != forumID || e.Type != 15 || !e.IsForum || !slices.Equal(e.Tags, []string{"bug", "staff"}) {
		t.Fatalf("forum as the library cached it: %+v", e)
	}
	post := step("posted")
	if post.Parent != forumID || !slices.Equal(post.Tags, []string{bugID}) || post.LastMessage != post.ID {
		t.Fatalf("post as the library read it: %+v", post)
	}
	if e := step("starter"); e.ID != post.ID || e.Channel != post.ID || e.Content != "when I click" {
		t.Fatalf("starter message: %+v", e)
	}
	if e := step("replied"); e.Channel != post.ID || e.ID == post.ID {
		t.Fatalf("reply: %+v", e)
	}
	if e := step("retagged"); e.ID != post.ID || len(e.Tags) != 0 {
		t.Fatalf("retag: %+v", e)
	}
	// A post with a file: the starter message (the post's id) carries it,
	// and the URL the library got serves the PNG.
	shot := step("postedFile")
	if shot.ID == "" || shot.ID == post.ID || shot.Channel != shot.ID || shot.Content != "see attached" || shot.LastMessage != shot.ID ||
		shot.Count != 1 || shot.Name != "shot.png" || shot.CType != "image/png" {
		t.Fatalf("post with a file as the library read it: %+v", shot)
	}
	resp, err := http.Get(shot.URL)
	must(t, err, "fetch the post's file")
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "image/png" || len(b) != 29 {
		t.Fatalf("fetch %s: %d %s %d bytes", shot.URL, resp.StatusCode, resp.Header.Get("Content-Type"), len(b))
	}
	var th struct {
		Type         int      `json:"type"`
		ParentID     string   `json:"parent_id"`
		AppliedTags  []string `json:"applied_tags"`
		MessageCount int      `json:"message_count"`
	}
	owner.do("GET", "/channels/"+post.ID, nil, &th)
	if th.Type != 11 || th.ParentID != forumID || th.AppliedTags == nil || len(th.AppliedTags) != 0 || th.MessageCount != 1 {
		t.Fatalf("post over REST: %+v (message_count counts the reply, not the starter)", th)
	}
}

// TestDiscordJSForumBot runs js/forum.js, an unmodified discord.js 14 bot
// of a real application, through a forum post.
func TestDiscordJSForumBot(t *testing.T) {
	dir := jsDir(t)
	s := startServer(t)
	owner, token, forumID, bugID := forumWorld(t, s, "djsforum")
	events := startNodeBot[forumEvent](t, dir, "forum.js",
		[]string{"CONCORD_API=http://" + s.proxy.addr() + "/api", "CONCORD_TOKEN=" + token, "CONCORD_FORUM=" + forumID}, nil)
	checkForum(t, owner, forumID, bugID, events)
}

// TestDiscordPyForumBot runs py/forum.py, an unmodified discord.py 2 bot
// of a real application, through the same steps.
func TestDiscordPyForumBot(t *testing.T) {
	py := pythonBin(t)
	s := startServer(t)
	owner, token, forumID, bugID := forumWorld(t, s, "dpyforum")
	dir, err := filepath.Abs("py")
	must(t, err, "py dir")
	events := startBot[forumEvent](t, "discord.py", dir, []string{py, "forum.py"},
		[]string{"CONCORD_HOST=" + s.proxy.addr(), "CONCORD_TOKEN=" + token, "CONCORD_FORUM=" + forumID}, nil)
	checkForum(t, owner, forumID, bugID, events)
}
