package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/voice"
	"github.com/concord-chat/concord/runtime/domain/voice/token"
)

// A guild node that starts owning a guild rebuilds the guild's voice
// states from the rosters of the servers hosting its calls
// (guild.VoiceRoster). Each load report lists the guilds with calls on its
// server, so the fleet asks only those servers, and a guild without calls
// costs no request at all; a server lists a guild's first call in an
// early report, so a guild that moves right after a join finds it.

var (
	_ guild.VoiceRoster      = (*Registry)(nil)
	_ guild.VoiceRoster      = (*Local)(nil)
	_ guild.VoiceSelfControl = (*Registry)(nil)
	_ guild.VoiceSelfControl = (*Local)(nil)
)

// maxRosterBytes bounds a roster answer: a full server's participants.
const maxRosterBytes = 8 << 20

// hosting lists the servers whose report lists guildID.
func hosting(loads []voice.Load, guildID snowflake.ID) []voice.Load {
	var out []voice.Load
	for _, l := range loads {
		if _, ok := slices.BinarySearch(l.Guilds, guildID); ok || l.GuildsOmitted {
			out = append(out, l)
		}
	}
	slices.SortFunc(out, func(a, b voice.Load) int { return strings.Compare(a.Server, b.Server) })
	return out
}

func participants(l voice.Load, guildID snowflake.ID, es []voice.RosterEntry) []guild.VoiceParticipant {
	out := make([]guild.VoiceParticipant, 0, len(es))
	for _, e := range es {
		out = append(out, guild.VoiceParticipant{Server: server(l), ChannelID: e.ChannelID, UserID: e.UserID, SessionID: e.SessionID,
			Mute: e.Mute, Deaf: e.Deaf, SelfMute: e.SelfMute, SelfDeaf: e.SelfDeaf})
	}
	return out
}

// Roster implements guild.VoiceRoster: it asks every live server whose
// report lists the guild for the guild's participants, in parallel, with
// a command signed like the others (the answer names users in calls, so
// only the guild tier may ask). A server that does not answer is left out
// and named in the error; the others' participants are returned.
func (r *Registry) Roster(ctx context.Context, guildID snowflake.ID) ([]guild.VoiceParticipant, error) {
	// A guild node that just started (it took over a dead node's guilds)
	// may be asked before its first read of the reports: wait for it.
	select {
	case <-r.loaded:
	case <-ctx.Done():
		return nil, fmt.Errorf("fleet: roster of guild %d: no load reports read yet: %w", guildID, ctx.Err())
	}
	hs := hosting(r.live(), guildID)
	if len(hs) == 0 {
		return nil, nil
	}
	r.mu.Lock()
	key := r.key
	r.mu.Unlock()
	if key == nil {
		return nil, errors.New("fleet: roster: the fleet has no signing key")
	}
	results := make([][]guild.VoiceParticipant, len(hs))
	errs := make([]error, len(hs))
	var wg sync.WaitGroup
	for i, l := range hs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			es, err := r.roster(ctx, l.Server, guildID)
			if err != nil {
				errs[i] = err
				return
			}
			results[i] = participants(l, guildID, es)
		}()
	}
	wg.Wait()
	var out []guild.VoiceParticipant
	for _, ps := range results {
		out = append(out, ps...)
	}
	return out, errors.Join(errs...)
}

// roster posts one signed roster request.
func (r *Registry) roster(ctx context.Context, server string, guildID snowflake.ID) ([]voice.RosterEntry, error) {
	r.mu.Lock()
	key := r.key
	r.mu.Unlock()
	cmd, err := token.SignCommand(key, token.Command{Server: server, Op: token.OpRoster, GuildID: guildID}, r.cfg.Now())
	if err != nil {
		return nil, fmt.Errorf("fleet: roster of %s: %w", server, err)
	}
	select {
	case <-r.seen:
	case <-ctx.Done():
		return nil, fmt.Errorf("fleet: roster of %s: the voice nodes' addresses not read yet: %w", server, ctx.Err())
	}
	addr, err := r.controlAddr(server)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+voice.ControlPath, strings.NewReader(cmd))
	if err != nil {
		return nil, fmt.Errorf("fleet: roster request: %w", err)
	}
	req.Header.Set("Content-Type", "text/plain")
	resp, err := r.cfg.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fleet: roster of %s: %w", server, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxRosterBytes))
	if err != nil {
		return nil, fmt.Errorf("fleet: roster of %s: %w", server, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fleet: roster of %s: %s: %s", server, resp.Status, strings.TrimSpace(string(body)))
	}
	var res voice.ControlResult
	if err := json.Unmarshal(body, &res); err != nil {
		return nil, fmt.Errorf("fleet: roster of %s: %w", server, err)
	}
	return res.Participants, nil
}

// SetSelfVoiceState implements guild.VoiceSelfControl.
func (r *Registry) SetSelfVoiceState(_ context.Context, server string, guildID, channelID, userID snowflake.ID, selfMute, selfDeaf bool) {
	r.command(token.Command{Server: server, Op: token.OpSelf, GuildID: guildID, ChannelID: channelID, UserID: userID,
		SelfMute: selfMute, SelfDeaf: selfDeaf})
}

// Roster implements guild.VoiceRoster over the in-process servers.
func (l *Local) Roster(_ context.Context, guildID snowflake.ID) ([]guild.VoiceParticipant, error) {
	l.mu.Lock()
	servers := make([]*voice.Server, 0, len(l.servers))
	for _, s := range l.servers {
		servers = append(servers, s)
	}
	l.mu.Unlock()
	slices.SortFunc(servers, func(a, b *voice.Server) int { return strings.Compare(a.ID(), b.ID()) })
	var out []guild.VoiceParticipant
	for _, s := range servers {
		out = append(out, participants(s.Load(), guildID, s.Roster(guildID))...)
	}
	return out, nil
}

// SetSelfVoiceState implements guild.VoiceSelfControl.
func (l *Local) SetSelfVoiceState(_ context.Context, id string, guildID, channelID, userID snowflake.ID, selfMute, selfDeaf bool) {
	if s := l.get(id); s != nil {
		s.SetSelfVoiceState(guildID, channelID, userID, selfMute, selfDeaf)
	}
}
