package voice

import (
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/voice/token"
)

// The guild owns every voice state; an SFU in another process learns of a
// server mute, deafen or disconnect through a command the guild signs with
// the admission key (token.Command) and posts to ControlPath on the SFU's
// process. The signature is the credential: the SFU already trusts that
// key for admissions, the guild holds no other secret of the voice fleet,
// and a compromised SFU, which only verifies, cannot command another. A
// command names its server, expires in seconds and is obeyed once (its
// nonce), so a captured one cannot be replayed against any server.

// ControlPath is where the SFU's process serves commands (POST, body the
// signed command).
const ControlPath = "/voice/v1/control"

// maxCommandBytes bounds a command body.
const maxCommandBytes = token.MaxLen

// modKey is a member of a guild: server mute follows the member, not the
// channel.
type modKey struct{ guild, user snowflake.ID }

// voiceMod is the latest server mute and deafen the guild decided for a
// member, and when.
type voiceMod struct {
	mute, deaf bool
	at         time.Time
}

// joinVoiceState is the server mute and deafen a joining user starts
// with: the token's, unless the guild decided otherwise after signing it.
func (s *Server) joinVoiceState(c token.Claims) (mute, deaf bool) {
	signed := c.ExpiresAt().Add(-token.TTL)
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.mods[modKey{c.GuildID, c.UserID}]; ok && m.at.After(signed) {
		return m.mute, m.deaf
	}
	return c.Mute, c.Deaf
}

// ControlResult answers a command.
type ControlResult struct {
	// Applied is true when the user was in the call and the command took
	// effect; false when it was not connected (a state is still kept for
	// its join) or a later command had overtaken this one.
	Applied bool `json:"applied"`
	// Participants answers OpRoster: the guild's participants here.
	Participants []RosterEntry `json:"participants,omitempty"`
}

// ControlHandler serves POST ControlPath: it verifies the signed command
// and applies it. Refusals are 400 (malformed), 401 (bad signature,
// expired, replayed) and 421 (another server's command).
func (s *Server) ControlHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCommandBytes))
		if err != nil {
			s.m.commands.WithLabelValues("malformed").Inc()
			http.Error(w, "command too large", http.StatusRequestEntityTooLarge)
			return
		}
		res, code, reason := s.command(string(body))
		s.m.commands.WithLabelValues(reason).Inc()
		if code != http.StatusOK {
			http.Error(w, "voice command refused: "+reason, code)
			return
		}
		writeJSON(w, res)
	})
}

// command verifies and applies one signed command, answering the HTTP
// status and the metric's result.
func (s *Server) command(raw string) (ControlResult, int, string) {
	now := s.cfg.Now()
	c, err := s.verifier.VerifyCommand(raw, now)
	switch {
	case errors.Is(err, token.ErrSignature):
		return ControlResult{}, http.StatusUnauthorized, "bad_signature"
	case errors.Is(err, token.ErrExpired):
		return ControlResult{}, http.StatusUnauthorized, "expired"
	case err != nil:
		return ControlResult{}, http.StatusBadRequest, "malformed"
	case c.Server != s.cfg.ID:
		return ControlResult{}, http.StatusMisdirectedRequest, "other_server"
	case !s.useNonce("cmd:"+c.Nonce, c.ExpiresAt()):
		return ControlResult{}, http.StatusUnauthorized, "replayed"
	}
	var applied, stale bool
	switch c.Op {
	case token.OpRoster:
		return ControlResult{Applied: true, Participants: s.Roster(c.GuildID)}, http.StatusOK, "roster"
	case token.OpSelf:
		applied, stale = s.setSelfState(c.GuildID, c.ChannelID, c.UserID, c.SelfMute, c.SelfDeaf, c.IssuedAt())
	case token.OpDisconnect:
		applied = s.Disconnect(c.GuildID, c.ChannelID, c.UserID)
	case token.OpState:
		applied, stale = s.setVoiceState(c.GuildID, c.ChannelID, c.UserID, c.Mute, c.Deaf, c.IssuedAt())
	}
	s.cfg.Logger.Debug("voice command", "op", c.Op, "guild_id", c.GuildID, "channel_id", c.ChannelID, "user_id", c.UserID,
		"mute", c.Mute, "deaf", c.Deaf, "applied", applied, "stale", stale)
	switch {
	case stale:
		return ControlResult{}, http.StatusOK, "stale"
	case !applied:
		return ControlResult{}, http.StatusOK, "not_connected"
	}
	return ControlResult{Applied: true}, http.StatusOK, "applied"
}
