package guild

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/permissions"
	"github.com/concord-chat/concord/runtime/domain/voice/token"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// Voice states.
//
// A member's voice state (which voice channel it is in, from which gateway
// session, muted or deafened by itself or by a moderator) lives in the
// guild actor, in memory: Discord's voice states end with the session, so
// nothing about them survives a restart. The actor decides a join with the
// one permission engine (VIEW_CHANNEL and CONNECT in the channel, the
// channel's user_limit unless the member has MOVE_MEMBERS), picks the voice
// server of the call through the VoiceAllocator on the channel's first join
// and signs the admission token the server verifies offline. Every
// VOICE_STATE_UPDATE goes out through canView, so a hidden channel's
// occupants are never revealed.

// IntentGuildVoiceStates gates VOICE_STATE_UPDATE for bots.
const IntentGuildVoiceStates uint64 = 1 << 7

// ErrNotInVoice means the target of a voice move is not in a voice channel
// (REST 40032).
var ErrNotInVoice = errors.New("guild: target user is not connected to voice")

// VoiceServer is one SFU the allocator can place a call on.
type VoiceServer struct {
	// ID is the server's id; tokens name it and other servers refuse them.
	ID string
	// Endpoint is VOICE_SERVER_UPDATE's endpoint: host:port, no scheme.
	Endpoint string
	// Region is the server's voice region id.
	Region string
}

// VoiceRegion is a region of GET /voice/regions.
type VoiceRegion struct {
	ID   string
	Name string
}

// VoiceAllocator places calls on voice servers. Implementations
// (runtime/domain/voice/fleet) follow the servers' load reports; every method is
// called inside a guild actor, so it must answer from memory.
type VoiceAllocator interface {
	// Pick returns the least-loaded healthy server of region, or of any
	// region when region is empty or has none.
	Pick(ctx context.Context, region string) (VoiceServer, error)
	// Healthy reports whether server is alive and takes calls.
	Healthy(server string) bool
	// Regions lists the regions that have a healthy server.
	Regions() []VoiceRegion
}

// VoiceControl is the optional ability of an allocator to act on a user
// already in a call: the server drops a disconnected user (close 4014) and
// stops forwarding a server-muted user's audio.
type VoiceControl interface {
	Disconnect(ctx context.Context, server string, guildID, channelID, userID snowflake.ID)
	SetServerVoiceState(ctx context.Context, server string, guildID, channelID, userID snowflake.ID, mute, deaf bool)
}

// VoiceCommandSigner is the optional need of an allocator for the key
// admission tokens are signed with: a fleet whose servers run in other
// processes signs the commands of VoiceControl with it, the one credential
// its servers trust from the guild tier. Voice.Enable hands it over.
type VoiceCommandSigner interface {
	UseSigningKey(key ed25519.PrivateKey)
}

// VoiceSuspector is the optional ability of an allocator to check a
// server out of band when a client says it failed (it rejoined the call it
// was in): a dead server then stops being Healthy without waiting for its
// load reports to go stale. Suspect must not block.
type VoiceSuspector interface {
	Suspect(server string)
}

// VoiceConfig turns voice channels on (Voice.Enable).
type VoiceConfig struct {
	// Allocator picks the server of each call. Required.
	Allocator VoiceAllocator
	// Key signs admission tokens; the voice fleet trusts its public half.
	Key ed25519.PrivateKey
	// FailoverInterval is how often the guilds with calls check that
	// each call's server is still healthy (failover.go). Default 500 ms;
	// negative disables the check.
	FailoverInterval time.Duration
	// Region is the region of this node: where a call of a channel
	// whose rtc_region is automatic goes when the fleet knows no region
	// for the first joiner's gateway node (voiceregion.go). Empty: any
	// region.
	Region string
	// AdoptGrace is how long a voice state rebuilt from the fleet's
	// roster waits for its session to attach to this node before it ends
	// (voicestate_roster.go). Default 30 s.
	AdoptGrace time.Duration
}

type voiceEnabled struct {
	VoiceConfig
	joins     *prometheus.CounterVec
	failovers prometheus.Counter
	// rebuilt counts voice states rebuilt from the fleet's rosters.
	rebuilt prometheus.Counter
	// guilds are the guilds with at least one call, for the failover
	// check; actors keep it current.
	guilds sync.Map
}

// Voice is the voice seam of a Service (Service.Voice): turning voice on,
// voice moderation and the voice regions. It holds the host, whose actors
// keep the voice states; op 4 itself stays on the host
// (Service.UpdateVoiceState), the session operation the gateway reaches
// the same way on this node and over GuildNode.
type Voice struct {
	s *Service
}

// Enable turns op 4 and the voice parts of the member routes on.
// Without it op 4 is ignored and guilds report no voice states.
func (vc *Voice) Enable(cfg VoiceConfig) error {
	s := vc.s
	if cfg.Allocator == nil || len(cfg.Key) != ed25519.PrivateKeySize {
		return errors.New("guild: Voice.Enable needs an Allocator and an Ed25519 Key")
	}
	v := &voiceEnabled{VoiceConfig: cfg, joins: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "concord_guild_voice_joins_total",
		Help: "Voice channel joins (op 4) by result: joined, rejoined, moved, left, refused_permissions, refused_full, refused_channel, no_server.",
	}, []string{"result"}), failovers: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "concord_guild_voice_failovers_total",
		Help: "Calls placed on another voice server because theirs stopped being healthy.",
	}), rebuilt: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "concord_guild_voice_states_rebuilt_total",
		Help: "Voice states a guild actor rebuilt from the voice fleet's rosters when it loaded (the guild moved to this node).",
	})}
	if s.cfg.Registerer != nil {
		if err := s.cfg.Registerer.Register(v.joins); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return fmt.Errorf("guild: voice metrics: %w", err)
			}
			v.joins = are.ExistingCollector.(*prometheus.CounterVec)
		}
		if err := s.cfg.Registerer.Register(v.failovers); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return fmt.Errorf("guild: voice metrics: %w", err)
			}
			v.failovers = are.ExistingCollector.(prometheus.Counter)
		}
		if err := s.cfg.Registerer.Register(v.rebuilt); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return fmt.Errorf("guild: voice metrics: %w", err)
			}
			v.rebuilt = are.ExistingCollector.(prometheus.Counter)
		}
	}
	if v.AdoptGrace <= 0 {
		v.AdoptGrace = adoptGrace
	}
	if v.FailoverInterval == 0 {
		v.FailoverInterval = 500 * time.Millisecond
	}
	if ks, ok := cfg.Allocator.(VoiceCommandSigner); ok {
		ks.UseSigningKey(cfg.Key)
	}
	if !s.voice.CompareAndSwap(nil, v) {
		return errors.New("guild: Voice.Enable called twice")
	}
	if v.FailoverInterval > 0 {
		s.wg.Add(1)
		go s.runVoiceFailover(v)
	}
	return nil
}

// VoiceStateRequest is op 4 VOICE_STATE_UPDATE.
type VoiceStateRequest struct {
	GuildID snowflake.ID
	// ChannelID is the voice channel to join; 0 leaves.
	ChannelID          snowflake.ID
	SelfMute, SelfDeaf bool
}

// voiceState is one member's state in an actor.
type voiceState struct {
	userID    snowflake.ID
	channelID snowflake.ID
	session   event.SessionID
	server    string
	selfMute  bool
	selfDeaf  bool
	selfVideo bool
	// sent is when the session was last sent VOICE_SERVER_UPDATE.
	sent time.Time
	// adopted is when the state was rebuilt from the fleet's roster,
	// until its session attaches here (voicestate_roster.go); zero for a
	// state this actor decided.
	adopted time.Time
}

// actorVoice is an actor's voice state, made on first use.
type actorVoice struct {
	states map[snowflake.ID]*voiceState // by user
	// calls maps a voice channel to the server hosting its call.
	calls map[snowflake.ID]VoiceServer
	// mute and deaf are the server mute and deafen of members; they
	// follow the member from call to call.
	mute, deaf map[snowflake.ID]bool
}

// voiceState returns the actor's voice state, built on first use: from
// the voice fleet's roster of the guild's calls (voicestate_roster.go), so
// the calls of a guild that moved here come with it.
func (a *Actor) voiceState() *actorVoice {
	if a.voice == nil {
		a.voice = &actorVoice{states: map[snowflake.ID]*voiceState{}, calls: map[snowflake.ID]VoiceServer{},
			mute: map[snowflake.ID]bool{}, deaf: map[snowflake.ID]bool{}}
		a.rebuildVoice(a.voice)
	}
	return a.voice
}

// wireVoiceState is Discord's voice state object.
type wireVoiceState struct {
	GuildID                 *snowflake.ID `json:"guild_id,omitempty"`
	ChannelID               *snowflake.ID `json:"channel_id"`
	UserID                  snowflake.ID  `json:"user_id"`
	Member                  *wire.Member  `json:"member,omitempty"`
	SessionID               string        `json:"session_id"`
	Deaf                    bool          `json:"deaf"`
	Mute                    bool          `json:"mute"`
	SelfDeaf                bool          `json:"self_deaf"`
	SelfMute                bool          `json:"self_mute"`
	SelfStream              bool          `json:"self_stream"`
	SelfVideo               bool          `json:"self_video"`
	Suppress                bool          `json:"suppress"`
	RequestToSpeakTimestamp *string       `json:"request_to_speak_timestamp"`
}

// voiceServerUpdate is VOICE_SERVER_UPDATE.
type voiceServerUpdate struct {
	Token    string       `json:"token"`
	GuildID  snowflake.ID `json:"guild_id"`
	Endpoint string       `json:"endpoint"`
}

func (a *Actor) wireVoice(ctx context.Context, st *voiceState, withGuild bool) wireVoiceState {
	v := a.voiceState()
	out := wireVoiceState{UserID: st.userID, SessionID: string(st.session), SelfMute: st.selfMute, SelfDeaf: st.selfDeaf,
		SelfVideo: st.selfVideo, Mute: v.mute[st.userID], Deaf: v.deaf[st.userID]}
	if st.channelID != 0 {
		c := st.channelID
		out.ChannelID = &c
	}
	if withGuild {
		g := a.id
		out.GuildID = &g
		if m, ok := a.members[st.userID]; ok {
			wm := a.voiceMember(ctx, *m)
			out.Member = &wm
		}
	}
	return out
}

// voiceMember is a member object with its server mute and deafen.
func (a *Actor) voiceMember(ctx context.Context, m store.Member) wire.Member {
	wm := a.wireMember(ctx, m)
	if a.voice != nil {
		wm.Mute, wm.Deaf = a.voice.mute[m.UserID], a.voice.deaf[m.UserID]
	}
	return wm
}

// voiceStatesFor lists GUILD_CREATE's voice_states: the states in the
// channels userID sees.
func (a *Actor) voiceStatesFor(ctx context.Context, userID snowflake.ID) []any {
	out := []any{}
	if a.svc.voice.Load() == nil {
		return out
	}
	a.voiceState()
	users := make([]snowflake.ID, 0, len(a.voice.states))
	for id := range a.voice.states {
		users = append(users, id)
	}
	slices.SortFunc(users, cmpID)
	for _, id := range users {
		st := a.voice.states[id]
		if a.canView(userID, st.channelID) {
			out = append(out, a.wireVoice(ctx, st, false))
		}
	}
	return out
}

// UpdateVoiceState handles op 4 from sess. A join the permission engine
// refuses (no VIEW_CHANNEL or CONNECT, a full channel, not a voice channel)
// changes nothing and sends nothing, as Discord does; the error says why
// for the log.
func (s *Service) UpdateVoiceState(ctx context.Context, sess event.Session, req VoiceStateRequest) error {
	v := s.voice.Load()
	if v == nil {
		return nil
	}
	err := s.do(ctx, req.GuildID, func(a *Actor) error {
		if _, ok := a.subs[sess.ID]; !ok {
			return fmt.Errorf("voice state: session %s is not in guild %d: %w", sess.ID, a.id, ErrMissingAccess)
		}
		return a.updateVoiceState(ctx, v, sess, req)
	})
	// Every op 4 leaves a line: a client stuck waiting for its voice
	// updates is told apart from one whose request never arrived.
	s.log.Debug("voice state request", "guild_id", req.GuildID, "channel_id", req.ChannelID, "user_id", sess.UserID,
		"session_id", sess.ID, "err", err)
	return err
}

func (a *Actor) updateVoiceState(ctx context.Context, v *voiceEnabled, sess event.Session, req VoiceStateRequest) error {
	vs := a.voiceState()
	cur := vs.states[sess.UserID]
	if req.ChannelID == 0 {
		if cur == nil {
			return nil
		}
		a.voiceLeave(ctx, v, cur)
		v.joins.WithLabelValues("left").Inc()
		return nil
	}
	c := a.channels[req.ChannelID]
	if c == nil || (c.Type != store.ChannelVoice && c.Type != channelStage) {
		v.joins.WithLabelValues("refused_channel").Inc()
		return fmt.Errorf("voice state: channel %d: %w", req.ChannelID, ErrUnknownChannel)
	}
	view, err := a.channelFor(sess.UserID, req.ChannelID, permissions.Connect)
	if err != nil {
		v.joins.WithLabelValues("refused_permissions").Inc()
		return fmt.Errorf("voice state: %w", err)
	}
	same := cur != nil && cur.channelID == req.ChannelID && cur.session == sess.ID
	if !same && c.UserLimit > 0 && !view.Permissions.Has(permissions.MoveMembers) && a.voiceCount(req.ChannelID) >= c.UserLimit {
		v.joins.WithLabelValues("refused_full").Inc()
		return fmt.Errorf("voice state: channel %d is full (%d): %w", req.ChannelID, c.UserLimit, ErrMissingPermissions)
	}
	if same && (cur.selfMute != req.SelfMute || cur.selfDeaf != req.SelfDeaf) {
		// A self mute or deafen in the same call: only the state changes.
		cur.selfMute, cur.selfDeaf = req.SelfMute, req.SelfDeaf
		if c, ok := v.Allocator.(VoiceSelfControl); ok {
			c.SetSelfVoiceState(ctx, cur.server, a.id, cur.channelID, cur.userID, cur.selfMute, cur.selfDeaf)
		}
		a.dispatchVoiceState(ctx, cur, cur.channelID)
		return nil
	}
	if same {
		// The same request again is a client rejoining after its voice
		// connection failed (discord.js does this): it gets the call's
		// server again, placed afresh if the old one died.
		srv, err := a.voiceServer(ctx, v, req.ChannelID, sess.Node)
		if err != nil {
			v.joins.WithLabelValues("no_server").Inc()
			return fmt.Errorf("voice state: %w", err)
		}
		if s, ok := v.Allocator.(VoiceSuspector); ok && srv.ID == cur.server {
			s.Suspect(srv.ID)
		}
		if srv.ID == cur.server && time.Since(cur.sent) < rejoinQuiet {
			// A client retrying a server that just failed it: the
			// allocator has not seen the server die yet; the failover
			// check sends the new one when it does. Answering now would
			// send the client straight back into the same failure.
			v.joins.WithLabelValues("rejoin_deferred").Inc()
			return nil
		}
		cur.server = srv.ID
		a.dispatchVoiceState(ctx, cur, cur.channelID)
		v.joins.WithLabelValues("rejoined").Inc()
		return a.sendVoiceServer(ctx, v, sess, cur, srv)
	}
	srv, err := a.voiceServer(ctx, v, req.ChannelID, sess.Node)
	if err != nil {
		v.joins.WithLabelValues("no_server").Inc()
		return fmt.Errorf("voice state: %w", err)
	}
	prev := snowflake.ID(0)
	if cur != nil {
		prev = cur.channelID
		if cur.session != sess.ID || cur.server != srv.ID || cur.channelID != req.ChannelID {
			// The user's other call (another session, or this one moving)
			// ends at its server.
			a.voiceControlDisconnect(ctx, v, cur)
		}
	}
	st := &voiceState{userID: sess.UserID, channelID: req.ChannelID, session: sess.ID, server: srv.ID,
		selfMute: req.SelfMute, selfDeaf: req.SelfDeaf}
	vs.states[sess.UserID] = st
	a.dispatchVoiceState(ctx, st, prev)
	if prev != 0 && prev != req.ChannelID {
		a.dropIdleCall(prev)
		v.joins.WithLabelValues("moved").Inc()
	} else {
		v.joins.WithLabelValues("joined").Inc()
	}
	return a.sendVoiceServer(ctx, v, sess, st, srv)
}

// rejoinQuiet is how soon after a VOICE_SERVER_UPDATE a rejoin to the same
// server is left unanswered.
const rejoinQuiet = 2 * time.Second

// channelStage is a stage channel (type 13): a voice channel too.
const channelStage = 13

// voiceServer returns the server of channelID's call: the one already
// hosting it while it is healthy, else a fresh pick in the channel's
// region (voiceregion.go); node is the gateway node of the joiner's
// session, whose region is the nearest when the channel's is automatic.
func (a *Actor) voiceServer(ctx context.Context, v *voiceEnabled, channelID snowflake.ID, node string) (VoiceServer, error) {
	vs := a.voiceState()
	if srv, ok := vs.calls[channelID]; ok && v.Allocator.Healthy(srv.ID) {
		return srv, nil
	}
	return a.placeCall(ctx, v, channelID, a.callRegion(v, channelID, node))
}

// placeCall puts channelID's call on the least-loaded healthy server of
// region (any region when empty or it has none).
func (a *Actor) placeCall(ctx context.Context, v *voiceEnabled, channelID snowflake.ID, region string) (VoiceServer, error) {
	vs := a.voiceState()
	srv, err := v.Allocator.Pick(ctx, region)
	if err != nil {
		return VoiceServer{}, fmt.Errorf("allocate a voice server for channel %d: %w: %w", channelID, ErrUnavailable, err)
	}
	vs.calls[channelID] = srv
	v.guilds.Store(a.id, true)
	return srv, nil
}

// sendVoiceServer signs st's admission token and sends the session
// VOICE_SERVER_UPDATE.
func (a *Actor) sendVoiceServer(ctx context.Context, v *voiceEnabled, sess event.Session, st *voiceState, srv VoiceServer) error {
	vs := a.voiceState()
	tok, err := token.Sign(v.Key, token.Claims{UserID: st.userID, GuildID: a.id, ChannelID: st.channelID,
		Server: srv.ID, SessionID: string(st.session), Mute: vs.mute[st.userID], Deaf: vs.deaf[st.userID],
		SelfMute: st.selfMute, SelfDeaf: st.selfDeaf}, time.Now())
	if err != nil {
		return fmt.Errorf("voice state: sign token: %w", err)
	}
	a.sendTo(ctx, sess, "VOICE_SERVER_UPDATE", voiceServerUpdate{Token: tok, GuildID: a.id, Endpoint: srv.Endpoint})
	st.sent = time.Now()
	return nil
}

// voiceCount is the number of users in a voice channel.
func (a *Actor) voiceCount(channelID snowflake.ID) int {
	n := 0
	for _, st := range a.voiceState().states {
		if st.channelID == channelID {
			n++
		}
	}
	return n
}

// voiceLeave removes st (left, disconnected, session gone) and tells the
// guild.
func (a *Actor) voiceLeave(ctx context.Context, v *voiceEnabled, st *voiceState) {
	vs := a.voiceState()
	delete(vs.states, st.userID)
	a.voiceControlDisconnect(ctx, v, st)
	prev := st.channelID
	gone := *st
	gone.channelID = 0
	a.dispatchVoiceState(ctx, &gone, prev)
	a.dropIdleCall(prev)
}

// dropIdleCall forgets the server of a call nobody is in any more, so the
// next join is placed afresh.
func (a *Actor) dropIdleCall(channelID snowflake.ID) {
	vs := a.voiceState()
	if a.voiceCount(channelID) == 0 {
		delete(vs.calls, channelID)
	}
	if v := a.svc.voice.Load(); v != nil && len(vs.calls) == 0 {
		v.guilds.Delete(a.id)
	}
}

func (a *Actor) voiceControlDisconnect(ctx context.Context, v *voiceEnabled, st *voiceState) {
	if c, ok := v.Allocator.(VoiceControl); ok && st.server != "" {
		c.Disconnect(ctx, st.server, a.id, st.channelID, st.userID)
	}
}

// dispatchVoiceState sends VOICE_STATE_UPDATE for st, whose channel was
// prev before the change, to the subscribers with GUILD_VOICE_STATES who
// see st's channel. A subscriber who saw prev but cannot see the new
// channel is told the user left (channel_id null): the hidden channel's id
// never reaches it.
func (a *Actor) dispatchVoiceState(ctx context.Context, st *voiceState, prev snowflake.ID) {
	full := a.wireVoice(ctx, st, true)
	b := newBatcher("VOICE_STATE_UPDATE", mustJSON(full))
	var left bool
	for _, sub := range a.sortedSubs() {
		if !wants(sub.s, IntentGuildVoiceStates) {
			continue
		}
		switch {
		case st.channelID != 0 && a.canView(sub.s.UserID, st.channelID):
			b.add(sub.s, 0)
		case prev != 0 && prev != st.channelID && a.canView(sub.s.UserID, prev):
			if !left {
				gone := full
				gone.ChannelID = nil
				b.payloads = append(b.payloads, mustJSON(gone))
				left = true
			}
			b.add(sub.s, len(b.payloads)-1)
		case st.channelID == 0 && prev != 0 && a.canView(sub.s.UserID, prev):
			b.add(sub.s, 0)
		}
	}
	b.flushGuild(ctx, a)
}

// voiceSessionGone removes the voice state of a session that ended.
func (a *Actor) voiceSessionGone(ctx context.Context, id event.SessionID) {
	v := a.svc.voice.Load()
	if v == nil || a.voice == nil {
		return
	}
	for _, st := range a.voice.states {
		if st.session == id {
			a.voiceLeave(ctx, v, st)
			return
		}
	}
}

// voiceChannelGone disconnects everyone in a deleted channel.
func (a *Actor) voiceChannelGone(ctx context.Context, channelID snowflake.ID) {
	v := a.svc.voice.Load()
	if v == nil || a.voice == nil {
		return
	}
	for _, st := range a.voice.states {
		if st.channelID == channelID {
			a.voiceLeave(ctx, v, st)
		}
	}
	delete(a.voice.calls, channelID)
}

// voiceMemberGone disconnects a member who left or was removed.
func (a *Actor) voiceMemberGone(ctx context.Context, userID snowflake.ID) {
	v := a.svc.voice.Load()
	if v == nil || a.voice == nil {
		return
	}
	if st := a.voice.states[userID]; st != nil {
		a.voiceLeave(ctx, v, st)
	}
	delete(a.voice.mute, userID)
	delete(a.voice.deaf, userID)
}
