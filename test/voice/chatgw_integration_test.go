//go:build integration

package voice

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// chatGateway is a stand-in for the chat gateway's voice part, for
// discord.py: Concord's own gateway does not answer op 4 yet (the
// guild-side wiring is separate work). It serves just what discord.py needs
// to reach its voice code: GET /users/@me, the gateway handshake (HELLO,
// READY, one GUILD_CREATE with the voice channel), heartbeat ACKs, and op 4
// answered with VOICE_STATE_UPDATE and VOICE_SERVER_UPDATE carrying a
// token the SFU's trusted key signed — the shapes Discord sends.
type chatGateway struct {
	t    *testing.T
	s    *sfu
	u    user
	addr string
}

func startChatGateway(t *testing.T, s *sfu, u user, others ...user) *chatGateway {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &chatGateway{t: t, s: s, u: u, addr: l.Addr().String()}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/v10/users/@me", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(g.userObj(u))
	})
	mux.HandleFunc("/api/v10/oauth2/applications/@me", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": strconv.FormatUint(u.id, 10), "name": "voice bot", "icon": nil,
			"description": "", "bot_public": true, "bot_require_code_grant": false, "verify_key": "00", "flags": 0,
			"owner": g.userObj(u), "team": nil, "summary": ""})
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { g.serveWS(w, r, others) })
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(l) }()
	t.Cleanup(func() { _ = hs.Close() })
	return g
}

func (g *chatGateway) userObj(u user) map[string]any {
	return map[string]any{"id": strconv.FormatUint(u.id, 10), "username": "bot" + strconv.FormatUint(u.id, 10),
		"discriminator": "0", "global_name": nil, "avatar": nil, "bot": true, "flags": 0}
}

func (g *chatGateway) serveWS(w http.ResponseWriter, r *http.Request, others []user) {
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	ws, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer ws.Close()
	var mu sync.Mutex
	seq := 0
	send := func(op int, t string, d any) {
		mu.Lock()
		defer mu.Unlock()
		m := map[string]any{"op": op, "d": d}
		if op == 0 {
			seq++
			m["s"], m["t"] = seq, t
		}
		_ = ws.WriteJSON(m)
	}
	send(10, "", map[string]any{"heartbeat_interval": 41250})
	gid, cid := strconv.Itoa(guildID), strconv.FormatUint(g.u.channel, 10)
	member := func(u user) map[string]any {
		return map[string]any{"user": g.userObj(u), "roles": []string{}, "joined_at": "2026-01-01T00:00:00+00:00", "deaf": false, "mute": false, "flags": 0}
	}
	for {
		var f struct {
			Op int             `json:"op"`
			D  json.RawMessage `json:"d"`
		}
		if err := ws.ReadJSON(&f); err != nil {
			return
		}
		switch f.Op {
		case 1:
			send(11, "", nil)
		case 2:
			send(0, "READY", map[string]any{"v": 10, "user": g.userObj(g.u), "session_id": g.u.session,
				"resume_gateway_url": "ws://" + g.addr, "guilds": []any{map[string]any{"id": gid, "unavailable": true}},
				"application": map[string]any{"id": strconv.FormatUint(g.u.id, 10), "flags": 0}, "private_channels": []any{}})
			members := []any{member(g.u)}
			for _, o := range others {
				members = append(members, member(o))
			}
			send(0, "GUILD_CREATE", map[string]any{"id": gid, "name": "voice test", "owner_id": strconv.FormatUint(g.u.id, 10),
				"unavailable": false, "member_count": len(members), "large": false, "features": []any{}, "emojis": []any{}, "stickers": []any{},
				"roles": []any{map[string]any{"id": gid, "name": "@everyone", "permissions": "8", "position": 0, "color": 0,
					"hoist": false, "managed": false, "mentionable": false, "flags": 0}},
				"channels": []any{map[string]any{"id": cid, "type": 2, "name": "voice", "position": 0, "guild_id": gid,
					"permission_overwrites": []any{}, "bitrate": 64000, "user_limit": 0, "rtc_region": nil}},
				"members": members, "voice_states": []any{}, "presences": []any{}, "threads": []any{}, "stage_instances": []any{},
				"guild_scheduled_events": []any{}, "soundboard_sounds": []any{}, "joined_at": "2026-01-01T00:00:00+00:00",
				"verification_level": 0, "default_message_notifications": 0, "explicit_content_filter": 0, "mfa_level": 0,
				"nsfw_level": 0, "premium_tier": 0, "preferred_locale": "en-US", "system_channel_flags": 0})
		case 4:
			// discord.py sends ids as numbers, discord.js as strings.
			var vs struct {
				ChannelID any  `json:"channel_id"`
				SelfMute  bool `json:"self_mute"`
				SelfDeaf  bool `json:"self_deaf"`
			}
			dec := json.NewDecoder(bytes.NewReader(f.D))
			dec.UseNumber()
			_ = dec.Decode(&vs)
			var channel any
			if vs.ChannelID != nil {
				channel = fmt.Sprint(vs.ChannelID)
			}
			send(0, "VOICE_STATE_UPDATE", map[string]any{"guild_id": gid, "channel_id": channel,
				"user_id": strconv.FormatUint(g.u.id, 10), "session_id": g.u.session, "deaf": false, "mute": false,
				"self_deaf": vs.SelfDeaf, "self_mute": vs.SelfMute, "self_video": false, "suppress": false,
				"request_to_speak_timestamp": nil, "member": member(g.u)})
			if channel != nil {
				send(0, "VOICE_SERVER_UPDATE", map[string]any{"token": g.s.token(g.u, nil), "guild_id": gid, "endpoint": g.s.endpoint})
			}
		}
	}
}
