package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"unicode/utf8"
)

// checkDecodeError requires every decoder failure to be a Discord error
// that a client can read: a 400 with a code and, for 50035, an errors tree.
func checkDecodeError(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	ae := toAPIError(err)
	if ae.Status != http.StatusBadRequest || (ae.Code != 50035 && ae.Code != 50006) {
		t.Fatalf("decoder error %v maps to %d/%d", err, ae.Status, ae.Code)
	}
	if ae.Code == 50035 && len(ae.Errors) == 0 {
		t.Fatalf("50035 without errors: %v", err)
	}
	if _, merr := json.Marshal(ae); merr != nil {
		t.Fatal(merr)
	}
}

func FuzzDecodeCreateMessage(f *testing.F) {
	for _, s := range []string{
		`{"content":"hi"}`,
		`{"content":"hi","nonce":123,"enforce_nonce":true}`,
		`{"content":"hi","nonce":"abc","tts":false,"embeds":[{"title":"x"}]}`,
		`{"content":"re","message_reference":{"message_id":"1234","channel_id":1,"fail_if_not_exists":false}}`,
		`{"content":"<@1> <@&2> @everyone","allowed_mentions":{"parse":["users"],"users":["1"],"roles":[2]}}`,
		`{"content":5}`, `{"content":""}`, `[]`, `null`, `{"nonce":1.5,"content":"x"}`,
		`{"content":"x","message_reference":{"message_id":"abc"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeCreateMessage(body)
		checkDecodeError(t, err)
		if err != nil {
			return
		}
		if utf8.RuneCountInString(req.Content) > maxContent {
			t.Fatalf("accepted %d characters", utf8.RuneCountInString(req.Content))
		}
		if req.nonce != "" && req.nonce[0] != '#' && utf8.RuneCountInString(req.nonce) > 25 {
			t.Fatalf("accepted nonce %q", req.nonce)
		}
		if req.MessageReference != nil && req.MessageReference.MessageID == nil {
			t.Fatal("accepted a reference without message_id")
		}
		if raw := nonceRoundTrip(req.nonce); req.nonce != "" && raw == nil {
			t.Fatalf("nonce %q does not encode", req.nonce)
		}
		parseMentions(req.Content, req.AllowedMentions)
	})
}

func nonceRoundTrip(n string) json.RawMessage {
	if n == "" {
		return nil
	}
	var v any
	raw := json.RawMessage(n[1:])
	if n[0] != '#' {
		raw, _ = json.Marshal(n)
	}
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	return raw
}

func FuzzDecodeChannel(f *testing.F) {
	for _, s := range []string{
		`{"name":"general","type":0}`,
		`{"name":"voice","type":2,"bitrate":64000,"user_limit":5,"parent_id":"12"}`,
		`{"name":"x","permission_overwrites":[{"id":"1","type":0,"allow":"1024","deny":2048}]}`,
		`{"name":"x","permission_overwrites":[{"id":"1","type":7}]}`,
		`{"parent_id":null,"topic":null,"rate_limit_per_user":21601}`,
		`{"type":"text"}`,
		`{"name":"help","type":15,"available_tags":[{"name":"bug","emoji_name":"🐛"},{"id":"5","name":"staff","moderated":true}]}`,
		`{"name":"f","type":15,"available_tags":[{"name":""}]}`,
		`{"available_tags":[{"name":"x","emoji_id":"1","emoji_name":"y"}]}`,
		`{"available_tags":null}`,
	} {
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, create bool) {
		req, err := decodeChannel(body, create)
		checkDecodeError(t, err)
		if err != nil {
			return
		}
		if create && req.Name.Value == "" {
			t.Fatal("created a channel without a name")
		}
		if len(req.AvailableTags.Value) > 20 {
			t.Fatalf("accepted %d available tags", len(req.AvailableTags.Value))
		}
		for _, tag := range req.AvailableTags.Value {
			if n := utf8.RuneCountInString(tag.Name); n < 1 || n > 20 {
				t.Fatalf("accepted tag name %q", tag.Name)
			}
		}
		if req.RateLimitPerUser.Value < 0 || req.RateLimitPerUser.Value > 21600 {
			t.Fatalf("accepted rate_limit_per_user %d", req.RateLimitPerUser.Value)
		}
	})
}

func FuzzDecodeModifyMember(f *testing.F) {
	for _, s := range []string{
		`{"nick":"bob"}`, `{"nick":null,"roles":["1",2]}`,
		`{"communication_disabled_until":"2030-01-01T00:00:00.000000+00:00"}`,
		`{"communication_disabled_until":null}`, `{"roles":"x"}`, `{"communication_disabled_until":"soon"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := decodeModifyMember(body)
		checkDecodeError(t, err)
		if err == nil && p.Nick != nil && utf8.RuneCountInString(*p.Nick) > 32 {
			t.Fatalf("accepted nick %q", *p.Nick)
		}
	})
}

func FuzzDecodeBulkDelete(f *testing.F) {
	for _, s := range []string{`{"messages":["1","2"]}`, `{"messages":[1,1]}`, `{"messages":"x"}`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ids, err := decodeBulkDelete(body)
		checkDecodeError(t, err)
		if err == nil && (len(ids) < 2 || len(ids) > 100) {
			t.Fatalf("accepted %d ids", len(ids))
		}
	})
}

func FuzzDecodeRole(f *testing.F) {
	for _, s := range []string{`{"name":"r","permissions":"8","color":255}`, `{"permissions":8,"hoist":true}`, `{"color":-1}`, `{"permissions":"x"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		_, err := decodeRole(body)
		checkDecodeError(t, err)
	})
}

func TestDecodeErrorsNameFields(t *testing.T) {
	for body, want := range map[string]string{
		`{"content":5}`:               `{"content":{"_errors":[{"code":"BASE_TYPE_STRING","message":"Must be a string."}]}}`,
		`{"content":"x","tts":"yes"}`: `{"tts":{"_errors":[{"code":"BASE_TYPE_BOOLEAN","message":"Must be either true or false."}]}}`,
		`{"content":"x","message_reference":{"message_id":"z"}}`: `{"message_reference":{"message_id":{"_errors":[{"code":"NUMBER_TYPE_COERCE","message":"Value \"\\\"z\\\"\" is not snowflake."}]}}}`,
	} {
		_, err := decodeCreateMessage([]byte(body))
		var ae *apiError
		if !errors.As(err, &ae) {
			t.Fatalf("%s: %v", body, err)
		}
		got, _ := json.Marshal(ae.Errors)
		if string(got) != want {
			t.Errorf("%s:\n got %s\nwant %s", body, got, want)
		}
	}
}

func FuzzDecodeRolePositions(f *testing.F) {
	for _, s := range []string{
		`[{"id":"1","position":2}]`, `[{"id":1,"position":null},{"id":"2","position":-5}]`,
		`[]`, `{}`, `null`, `[{"position":1}]`, `[{"id":"x","position":1}]`, `[{"id":"1","position":"2"}]`,
		` [{"id":"1","position":1e3}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		moves, err := decodeRolePositions(body)
		checkDecodeError(t, err)
		if err == nil && len(moves) > maxRoles {
			t.Fatalf("accepted %d moves", len(moves))
		}
	})
}

// FuzzDecodeForumPost fuzzes a thread request body with a forum post's
// message: the outer decode and the starter message's, as startThread and
// startForumPost run them.
func FuzzDecodeForumPost(f *testing.F) {
	for _, s := range []string{
		`{"name":"it crashes","applied_tags":["1",2],"message":{"content":"when I click"}}`,
		`{"name":"x","message":{"content":"","embeds":[{"title":"t"}]}}`,
		`{"name":"x","message":null}`, `{"name":"x","message":"text"}`, `{"name":"x","applied_tags":"1"}`,
		`{"name":"x","message":{"content":5}}`, `{"name":"x","applied_tags":[null]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req startThreadRequest
		err := decodeJSON(body, &req)
		checkDecodeError(t, err)
		if err != nil {
			return
		}
		if _, err := req.spec(1, 0); err != nil {
			checkDecodeError(t, err)
			return
		}
		_ = appliedTags(req.AppliedTags)
		if len(req.Message) == 0 || string(req.Message) == "null" {
			return
		}
		m, err := decodeCreateMessage(req.Message)
		checkDecodeError(t, err)
		if err == nil && utf8.RuneCountInString(m.Content) > maxContent {
			t.Fatalf("accepted a starter message of %d characters", utf8.RuneCountInString(m.Content))
		}
	})
}
