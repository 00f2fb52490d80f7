package bots_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/permissions"
)

// TestAnswersCarryAllowedMentions: a callback's and a followup's
// allowed_mentions reach the message writer, which resolves the
// content's mentions under it as a REST send does; a malformed one is
// refused as Discord refuses it (50035 naming the field) and writes
// nothing.
func TestAnswersCarryAllowedMentions(t *testing.T) {
	e := newEnv(t)
	a := e.createApp("Mentioner")
	e.install(a, permissions.ViewChannel|permissions.SendMessages)
	e.dispatch.online[a.BotID] = true
	id, token := e.invoke(a, e.command(a, "ping"))

	bad := map[string]any{"type": 4, "data": map[string]any{"content": "hi", "allowed_mentions": map[string]any{"parse": []string{"channels"}}}}
	r := e.expect(e.do("POST", callbackPath(id, token), "", bad), 400, 50035)
	if fmt.Sprint(r["errors"]) == "map[]" || len(e.messages.created()) != 0 {
		t.Fatalf("malformed allowed_mentions: %v, messages %+v", r, e.messages.created())
	}
	e.expect(e.do("POST", callbackPath(id, token), "", map[string]any{"type": 4, "data": map[string]any{
		"content": "hi <@5>", "allowed_mentions": map[string]any{"users": []string{"5"}},
	}}), 204, 0)
	e.expect(e.do("POST", fmt.Sprintf("/api/v10/webhooks/%d/%s", a.ID, token), "", map[string]any{
		"content": "again", "allowed_mentions": map[string]any{"parse": []string{}},
	}), 200, 0)
	created := e.messages.created()
	if len(created) != 2 {
		t.Fatalf("messages = %+v", created)
	}
	if am := created[0].AllowedMentions; am == nil || !slices.Equal(am.Users, []snowflake.ID{5}) || am.Parse != nil {
		t.Fatalf("the callback's allowed_mentions = %+v", am)
	}
	if am := created[1].AllowedMentions; am == nil || am.Parse == nil || len(*am.Parse) != 0 {
		t.Fatalf("the followup's allowed_mentions = %+v", am)
	}
}
