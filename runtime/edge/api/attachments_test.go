package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/concord-chat/concord/runtime/edge/api/uploads/uploadstest"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store/objects"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

func (e *env) upload(method, path, token string, payload any, files ...uploadstest.Part) (int, []byte) {
	e.t.Helper()
	ct, body := uploadstest.Body(payload, files...)
	req, _ := http.NewRequest(method, e.url+path, bytes.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	req.Header.Set("Content-Type", ct)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, raw
}

func fetch(t testing.TB, url string) (*http.Response, []byte) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, b
}

func TestAttachments(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	path := fmt.Sprintf("%s/channels/%d/messages", v10, w.general)
	status, raw := e.upload("POST", path, w.bob.Token,
		map[string]any{"content": "two files", "attachments": []map[string]any{{"id": 0, "filename": "renamed.png"}, {"id": "1"}}},
		uploadstest.File("files[0]", "cat.png", "text/html", uploadstest.PNG()),
		uploadstest.File("files[1]", "../../etc/notes.txt", "image/png", []byte("<html><script>alert(1)</script>")))
	if status != 200 {
		t.Fatalf("upload: %d %s", status, raw)
	}
	var m wire.Message
	json.Unmarshal(raw, &m)
	if len(m.Attachments) != 2 {
		t.Fatalf("attachments = %+v", m.Attachments)
	}
	img, doc := m.Attachments[0], m.Attachments[1]
	// Names are the client's (last path element, renamed by the
	// payload); types are sniffed, whatever the client claimed.
	if img.Filename != "renamed.png" || img.ContentType != "image/png" || img.Size != len(uploadstest.PNG()) ||
		doc.Filename != "notes.txt" || doc.ContentType != "text/html; charset=utf-8" {
		t.Fatalf("attachments = %+v", m.Attachments)
	}
	if !strings.HasPrefix(img.URL, e.url+"/api/v10/attachments/"+w.general.String()+"/"+img.ID.String()+"/renamed.png?ex=") {
		t.Fatalf("url = %s", img.URL)
	}
	res, body := fetch(t, img.URL)
	if res.StatusCode != 200 || !bytes.Equal(body, uploadstest.PNG()) || res.Header.Get("Content-Type") != "image/png" ||
		res.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("fetch image: %d %q %v", res.StatusCode, body, res.Header)
	}
	// HTML is never served as a page of this origin.
	res, body = fetch(t, doc.URL)
	if res.StatusCode != 200 || string(body) != "<html><script>alert(1)</script>" ||
		res.Header.Get("Content-Type") != "application/octet-stream" || !strings.HasPrefix(res.Header.Get("Content-Disposition"), "attachment") ||
		!strings.Contains(res.Header.Get("Content-Security-Policy"), "sandbox") {
		t.Fatalf("fetch html: %d %v", res.StatusCode, res.Header)
	}
	// A tampered or expired signature is refused.
	res, _ = fetch(t, strings.Replace(img.URL, "hm=", "hm=0", 1))
	if res.StatusCode != 401 {
		t.Fatalf("tampered: %d", res.StatusCode)
	}
	res, _ = fetch(t, strings.Replace(img.URL, "/renamed.png?", "/other.png?", 1))
	if res.StatusCode != 401 {
		t.Fatalf("other path with the same signature: %d", res.StatusCode)
	}
	// Reads re-sign the stored key.
	var read wire.Message
	e.ok("GET", fmt.Sprintf("%s/%d", path, m.ID), w.alice.Token, nil, &read)
	if len(read.Attachments) != 2 || !strings.Contains(read.Attachments[0].URL, "hm=") {
		t.Fatalf("read attachments = %+v", read.Attachments)
	}
	// A file alone is a message; files need ATTACH_FILES.
	status, raw = e.upload("POST", path, w.bob.Token, nil, uploadstest.File("files[0]", "a.txt", "text/plain", []byte("just a file")))
	if status != 200 {
		t.Fatalf("file only: %d %s", status, raw)
	}
	e.ok("PUT", fmt.Sprintf("%s/channels/%d/permissions/%d", v10, w.general, w.guildID), w.alice.Token,
		map[string]any{"type": 0, "deny": strconv.FormatUint(uint64(permissions.AttachFiles), 10)}, nil)
	status, raw = e.upload("POST", path, w.bob.Token, map[string]any{"content": "x"}, uploadstest.File("files[0]", "a.txt", "text/plain", []byte("x")))
	if status != 403 || !strings.Contains(string(raw), "50013") {
		t.Fatalf("without ATTACH_FILES: %d %s", status, raw)
	}
	// Errors: an attachment naming no file, eleven files, duplicates.
	status, raw = e.upload("POST", path, w.alice.Token, map[string]any{"content": "x", "attachments": []map[string]any{{"id": 3}}},
		uploadstest.File("files[0]", "a.txt", "text/plain", []byte("x")))
	if status != 400 || !strings.Contains(string(raw), "ATTACHMENT_NOT_FOUND") {
		t.Fatalf("dangling attachment: %d %s", status, raw)
	}
	var many []uploadstest.Part
	for i := 0; i <= maxFiles; i++ {
		many = append(many, uploadstest.File(fmt.Sprintf("files[%d]", i), "f.txt", "text/plain", []byte("x")))
	}
	status, raw = e.upload("POST", path, w.alice.Token, map[string]any{"content": "x"}, many...)
	if status != 400 || !strings.Contains(string(raw), "50035") {
		t.Fatalf("eleven files: %d %s", status, raw)
	}
	status, raw = e.upload("POST", path, w.alice.Token, map[string]any{"content": "x"},
		uploadstest.File("files[0]", "a", "text/plain", []byte("x")), uploadstest.File("files[0]", "b", "text/plain", []byte("y")))
	if status != 400 {
		t.Fatalf("duplicate index: %d %s", status, raw)
	}
}

func TestAttachmentLimits(t *testing.T) {
	// Uploads spool under os.TempDir(): a directory of this test's own, so
	// the check at the end sees only this test's files, not those of
	// another package's tests running at the same time.
	spool := t.TempDir()
	t.Setenv("TMPDIR", spool)
	e := newEnv(t)
	e.inProcess("it swaps in a handler with small limits and its own clock")
	w := e.world()
	objs := e.objectsDir()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	h := New(Config{MaxFileBytes: 1024, AttachmentURLTTL: time.Hour, Now: clock}, Deps{Store: e.store, Guilds: e.guilds, Auth: e.auth, IDs: e.ids, Objects: objs})
	e.srv.Config.Handler = h
	path := fmt.Sprintf("%s/channels/%d/messages", v10, w.general)
	status, raw := e.upload("POST", path, w.alice.Token, map[string]any{"content": "x"}, uploadstest.File("files[0]", "big.bin", "application/octet-stream", bytes.Repeat([]byte{1}, 1025)))
	if status != 413 || !strings.Contains(string(raw), "40005") {
		t.Fatalf("too large: %d %s", status, raw)
	}
	status, raw = e.upload("POST", path, w.alice.Token, map[string]any{"content": "x"}, uploadstest.File("files[0]", "ok.bin", "application/octet-stream", bytes.Repeat([]byte{1}, 1024)))
	if status != 200 {
		t.Fatalf("at the limit: %d %s", status, raw)
	}
	var m wire.Message
	json.Unmarshal(raw, &m)
	// The URL works until it expires.
	if res, _ := fetch(t, m.Attachments[0].URL); res.StatusCode != 200 {
		t.Fatalf("fresh URL: %d", res.StatusCode)
	}
	mu.Lock()
	now = now.Add(time.Hour + time.Second)
	mu.Unlock()
	if res, _ := fetch(t, m.Attachments[0].URL); res.StatusCode != 404 {
		t.Fatalf("expired URL: %d", res.StatusCode)
	}
	// No temporary files are left behind.
	left, err := os.ReadDir(spool)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range left {
		if strings.HasPrefix(f.Name(), "concord-upload-") {
			t.Errorf("temporary upload left: %s", f.Name())
		}
	}
}

func TestWebhookAttachments(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	wh := e.createWebhook(w.alice.Token, w.general, "Images")
	status, raw := e.upload("POST", whPath(wh)+"?wait=true", "", map[string]any{"username": "Imager"},
		uploadstest.File("files[0]", "pic.png", "image/png", uploadstest.PNG()))
	if status != 200 {
		t.Fatalf("webhook upload: %d %s", status, raw)
	}
	var m wire.Message
	json.Unmarshal(raw, &m)
	if len(m.Attachments) != 1 || m.Attachments[0].ContentType != "image/png" || m.WebhookID != wh.ID {
		t.Fatalf("webhook attachment = %+v", m)
	}
	res, body := fetch(t, m.Attachments[0].URL)
	if res.StatusCode != 200 || !bytes.Equal(body, uploadstest.PNG()) {
		t.Fatalf("fetch: %d", res.StatusCode)
	}
	// Editing keeps the listed attachments and adds new ones.
	status, raw = e.upload("PATCH", fmt.Sprintf("%s/messages/%d", whPath(wh), m.ID), "",
		map[string]any{"content": "now two", "attachments": []map[string]any{{"id": m.Attachments[0].ID.String()}, {"id": 0}}},
		uploadstest.File("files[0]", "b.txt", "text/plain", []byte("second")))
	if status != 200 {
		t.Fatalf("edit with file: %d %s", status, raw)
	}
	var ed wire.Message
	json.Unmarshal(raw, &ed)
	if len(ed.Attachments) != 2 || ed.Attachments[0].ID != m.Attachments[0].ID || ed.Attachments[1].Filename != "b.txt" {
		t.Fatalf("edited attachments = %+v", ed.Attachments)
	}
	// An empty attachments list removes them.
	var cleared wire.Message
	e.ok("PATCH", fmt.Sprintf("%s/messages/%d", whPath(wh), m.ID), "", map[string]any{"attachments": []any{}}, &cleared)
	if len(cleared.Attachments) != 0 || cleared.Content != "now two" {
		t.Fatalf("cleared = %+v", cleared)
	}
}

func (e *env) objectsDir() *objects.Dir {
	e.t.Helper()
	d, err := objects.NewDir(e.t.(*testing.T).TempDir())
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

func TestAttachmentEditAndDelete(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	path := fmt.Sprintf("%s/channels/%d/messages", v10, w.general)
	status, raw := e.upload("POST", path, w.bob.Token, map[string]any{"content": "two"},
		uploadstest.File("files[0]", "a.png", "image/png", uploadstest.PNG()), uploadstest.File("files[1]", "b.txt", "text/plain", []byte("bee")))
	if status != 200 {
		t.Fatalf("upload: %d %s", status, raw)
	}
	var m wire.Message
	json.Unmarshal(raw, &m)
	a, b := m.Attachments[0], m.Attachments[1]
	// Keep a, drop b, add c.
	status, raw = e.upload("PATCH", fmt.Sprintf("%s/%d", path, m.ID), w.bob.Token,
		map[string]any{"attachments": []map[string]any{{"id": a.ID.String()}, {"id": 0}}},
		uploadstest.File("files[0]", "c.txt", "text/plain", []byte("sea")))
	if status != 200 {
		t.Fatalf("edit: %d %s", status, raw)
	}
	var ed wire.Message
	json.Unmarshal(raw, &ed)
	if len(ed.Attachments) != 2 || ed.Attachments[0].ID != a.ID || ed.Attachments[1].Filename != "c.txt" || ed.Content != "two" {
		t.Fatalf("edited = %+v", ed.Attachments)
	}
	// The dropped file is gone from the object store.
	if res, _ := fetch(t, b.URL); res.StatusCode != 404 {
		t.Fatalf("dropped attachment still served: %d", res.StatusCode)
	}
	if res, _ := fetch(t, ed.Attachments[0].URL); res.StatusCode != 200 {
		t.Fatalf("kept attachment: %d", res.StatusCode)
	}
	// Someone else's message: 50005 before anything is stored.
	status, _ = e.upload("PATCH", fmt.Sprintf("%s/%d", path, m.ID), w.alice.Token, map[string]any{"content": "x"},
		uploadstest.File("files[0]", "d.txt", "text/plain", []byte("d")))
	if status != 403 {
		t.Fatalf("edit of another's message: %d", status)
	}
	// Deleting the message deletes its files.
	e.ok("DELETE", fmt.Sprintf("%s/%d", path, m.ID), w.bob.Token, nil, nil)
	for _, at := range ed.Attachments {
		if res, _ := fetch(t, at.URL); res.StatusCode != 404 {
			t.Fatalf("attachment of a deleted message still served: %d", res.StatusCode)
		}
	}
}

// TestAttachmentsOfDeletedChannels checks that deleting a channel deletes
// the objects of its messages' attachments and of its threads' messages,
// and that deleting a thread deletes its own, leaving other channels'.
func TestAttachmentsOfDeletedChannels(t *testing.T) {
	e := newEnv(t)
	e.inProcess("it reads the object store the attachments went to")
	w := e.world()
	var doomed, other wire.Channel
	e.ok("POST", fmt.Sprintf("%s/guilds/%d/channels", v10, w.guildID), w.alice.Token, map[string]any{"name": "doomed"}, &doomed)
	e.ok("POST", fmt.Sprintf("%s/guilds/%d/channels", v10, w.guildID), w.alice.Token, map[string]any{"name": "other"}, &other)
	upload := func(channel snowflake.ID, name string) wire.Attachment {
		t.Helper()
		status, raw := e.upload("POST", fmt.Sprintf("%s/channels/%d/messages", v10, channel), w.alice.Token, map[string]any{"content": name},
			uploadstest.File("files[0]", name, "text/plain", []byte(name)))
		var m wire.Message
		if status != 200 || json.Unmarshal(raw, &m) != nil || len(m.Attachments) != 1 {
			t.Fatalf("upload %s: %d %s", name, status, raw)
		}
		return m.Attachments[0]
	}
	exists := func(a wire.Attachment) bool {
		t.Helper()
		u, err := url.Parse(a.URL)
		if err != nil {
			t.Fatal(err)
		}
		key := strings.TrimPrefix(u.Path, "/")
		key = key[strings.Index(key, "attachments/"):]
		rc, _, err := e.objs.Get(t.Context(), key)
		switch {
		case err == nil:
			rc.Close()
			return true
		case errors.Is(err, objects.ErrNotFound):
			return false
		}
		t.Fatalf("get %s: %v", key, err)
		return false
	}
	inChannel := upload(doomed.ID, "channel.txt")
	th := e.thread(w.alice.Token, fmt.Sprintf("%s/channels/%d/threads", v10, doomed.ID), map[string]any{"name": "t", "type": 11})
	inThread := upload(th.ID, "thread.txt")
	lone := e.thread(w.alice.Token, fmt.Sprintf("%s/channels/%d/threads", v10, other.ID), map[string]any{"name": "lone", "type": 11})
	inLone := upload(lone.ID, "lone.txt")
	kept := upload(other.ID, "kept.txt")
	for _, a := range []wire.Attachment{inChannel, inThread, inLone, kept} {
		if !exists(a) {
			t.Fatalf("%s not stored", a.Filename)
		}
	}
	e.ok("DELETE", fmt.Sprintf("%s/channels/%d", v10, doomed.ID), w.alice.Token, nil, nil)
	if exists(inChannel) || exists(inThread) {
		t.Fatal("attachments of a deleted channel or of its thread are still stored")
	}
	e.ok("DELETE", fmt.Sprintf("%s/channels/%d", v10, lone.ID), w.alice.Token, nil, nil)
	if exists(inLone) {
		t.Fatal("the attachment of a deleted thread is still stored")
	}
	if !exists(kept) {
		t.Fatal("deleting other channels deleted this channel's attachment")
	}
	if res, _ := fetch(t, kept.URL); res.StatusCode != 200 {
		t.Fatalf("kept attachment served: %d", res.StatusCode)
	}
}
