package readstate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Config configures a Service.
type Config struct {
	// FlushInterval is how often channel records are written and the
	// event log offsets below them marked (user records are written
	// through, see Ack and AddMentions). Default 30s.
	FlushInterval time.Duration
	// Users is the most users cached (each with all its records). Default
	// 100,000.
	Users int
	// Channels is the most channel records cached. Default 100,000.
	Channels int
	// Shards is the number of LRU shards. Default 64.
	Shards int
	// ChannelMentions is how many @everyone/@here mentions a channel keeps
	// (older ones stop counting). Default 100.
	ChannelMentions int
	// SeenPerChannel is how many recent message ids a channel remembers to
	// drop events published twice. Default 128.
	SeenPerChannel int
	// Group is the consumer group on the event log. Default "readstate".
	Group string
	// Topic is the topic of message events. Default eventlog.MessagesTopic.
	Topic string
	// Mentions receives the user mentions the consumer counts, to hand
	// them to the owner of each user when read states are sharded over
	// several nodes. Default: this service counts them (AddMentions).
	Mentions Mentions
	// Owns reports whether this service owns user's read states and
	// under which epoch (the read-state ring's revision): a change of a
	// user first claims the user's records at that epoch in the store,
	// which fences off the writes of any owner at an older one. ok false
	// refuses the change with ErrNotOwner. Nil: this service owns every
	// user and claims nothing (one node, `concord dev`).
	Owns func(user snowflake.ID) (epoch int64, ok bool)
	// Registerer receives metrics. Nil registers nothing.
	Registerer prometheus.Registerer
	// Logger receives diagnostics. Default slog.Default().
	Logger *slog.Logger
}

// Service holds read states: acks from the API, mention counts from the
// event log, write-behind to a Store.
type Service struct {
	cfg   Config
	store Store
	vis   Visibility
	roles Roles

	users    *lru[*userEntry]
	channels *lru[*channelEntry]

	flushMu sync.Mutex    // one store write at a time
	gc      committer     // the group commit of user records
	kick    chan struct{} // a dirty entry waits for eviction: flush now
	cons    consumerState

	// ackWriteBehind answers acks before they are written (the behaviour
	// before acks were written through), for the benchmark's peer only.
	ackWriteBehind bool

	// inflight holds what a running flush is writing, so an entry evicted
	// (clean) and reloaded meanwhile does not read the older stored copy.
	inflightMu    sync.Mutex
	inflightUsers map[snowflake.ID][]Record
	inflightChans map[snowflake.ID]ChannelRecord

	mu     sync.Mutex
	closed bool

	m metrics
}

type userEntry struct {
	user  snowflake.ID
	recs  map[snowflake.ID]*Record
	dirty map[snowflake.ID]bool
	// epoch is the epoch this service holds the user's records at in the
	// store, which its cached records are current for (0: not claimed,
	// loaded by a read).
	epoch int64
}

func (e *userEntry) record(channel snowflake.ID) *Record {
	r, ok := e.recs[channel]
	if !ok {
		r = &Record{UserID: e.user, ChannelID: channel}
		e.recs[channel] = r
	}
	return r
}

type channelEntry struct {
	rec   ChannelRecord
	dirty bool
}

// markDeleted records that the delete at offset off removed message id,
// when the message is in the remembered window: a later copy of its
// create (published twice) then counts nothing.
func (c *channelEntry) markDeleted(id snowflake.ID, off int64) {
	for i := range c.rec.Seen {
		s := &c.rec.Seen[i]
		if s.MessageID == id && s.Offset >= 0 {
			s.Offset = -(off + 1)
			c.dirty = true
		}
	}
}

// seenAt returns the offset message id was first counted at.
func (c *channelEntry) seenAt(id snowflake.ID) (int64, bool) {
	for _, s := range c.rec.Seen {
		if s.MessageID == id {
			return s.Offset, true
		}
	}
	return 0, false
}

// New returns a Service on store. vis decides who can see a channel;
// roles expands role mentions (nil: role mentions are not counted).
func New(cfg Config, store Store, vis Visibility, roles Roles) (*Service, error) {
	if store == nil || vis == nil {
		return nil, errors.New("readstate: New needs a store and a visibility")
	}
	if cfg.FlushInterval <= 0 {
		cfg.FlushInterval = 30 * time.Second
	}
	if cfg.Users <= 0 {
		cfg.Users = 100_000
	}
	if cfg.Channels <= 0 {
		cfg.Channels = 100_000
	}
	if cfg.Shards <= 0 {
		cfg.Shards = 64
	}
	if cfg.ChannelMentions <= 0 {
		cfg.ChannelMentions = 100
	}
	if cfg.SeenPerChannel <= 0 {
		cfg.SeenPerChannel = 128
	}
	if cfg.Group == "" {
		cfg.Group = "readstate"
	}
	if cfg.Topic == "" {
		cfg.Topic = eventlog.MessagesTopic
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	s := &Service{cfg: cfg, store: store, vis: vis, roles: roles}
	if s.cfg.Mentions == nil {
		s.cfg.Mentions = s
	}
	if err := s.m.init(cfg.Registerer); err != nil {
		return nil, err
	}
	s.kick = make(chan struct{}, 1)
	pressure := func() {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
	s.users = newLRU(cfg.Shards, cfg.Users, func(e *userEntry) bool { return len(e.dirty) > 0 }, pressure)
	s.channels = newLRU(cfg.Shards, cfg.Channels, func(c *channelEntry) bool { return c.dirty }, pressure)
	s.cons.applied = map[int32]int64{}
	return s, nil
}

func (s *Service) loadUser(user snowflake.ID) func(context.Context) (*userEntry, error) {
	return func(ctx context.Context) (*userEntry, error) {
		// The copies a write in flight carries are read before the store:
		// that write then lands either before the store is read, or after
		// this read of it. Read after the store, a write landing between
		// the two reads was in neither, and the entry lost its change.
		// No newer copy of the user can be taken meanwhile: the user is
		// not cached, and its shard is locked while it loads.
		s.inflightMu.Lock()
		inflight := slices.Clone(s.inflightUsers[user])
		s.inflightMu.Unlock()
		recs, err := s.store.LoadUser(ctx, user)
		if err != nil {
			return nil, fmt.Errorf("%w: load user %d: %v", ErrStore, user, err)
		}
		// An in-flight copy at an epoch other than the store's is from a
		// write the store fences (another owner claimed the user since):
		// older than what the store has, and never to land.
		if len(recs) > 0 {
			inflight = slices.DeleteFunc(inflight, func(r Record) bool { return r.Epoch != recs[0].Epoch })
		}
		recs = append(recs, inflight...) // newer copies last
		e := &userEntry{user: user, recs: make(map[snowflake.ID]*Record, len(recs)), dirty: map[snowflake.ID]bool{}}
		for i := range recs {
			r := recs[i]
			e.recs[r.ChannelID] = &r
		}
		s.m.loads.Inc()
		return e, nil
	}
}

func (s *Service) loadChannel(channel snowflake.ID) func(context.Context) (*channelEntry, error) {
	return func(ctx context.Context) (*channelEntry, error) {
		// In flight first, as loadUser reads it.
		s.inflightMu.Lock()
		inflight, written := s.inflightChans[channel]
		s.inflightMu.Unlock()
		if written {
			return &channelEntry{rec: cloneChannel(inflight)}, nil
		}
		rec, ok, err := s.store.LoadChannel(ctx, channel)
		if err != nil {
			return nil, fmt.Errorf("%w: load channel %d: %v", ErrStore, channel, err)
		}
		if !ok {
			rec = ChannelRecord{ChannelID: channel}
		}
		return &channelEntry{rec: rec}, nil
	}
}

func cloneChannel(r ChannelRecord) ChannelRecord {
	r.Everyone = append([]ChannelMention(nil), r.Everyone...)
	r.Seen = append([]SeenMessage(nil), r.Seen...)
	return r
}

func (s *Service) check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return nil
}

// Ack moves user's read marker in channel to message and clears the
// channel's mention count (the @everyone entries up to message stop
// counting too). It returns what MESSAGE_ACK must carry to the user's other
// sessions, once the change is in the store (group-committed with the
// acks that arrive meanwhile). ErrNotOwner means another owner holds the
// user (Config.Owns, or a later claim in the store).
func (s *Service) Ack(ctx context.Context, user, channel, message snowflake.ID) (MessageAck, error) {
	if err := s.check(); err != nil {
		return MessageAck{}, err
	}
	if !s.vis.CanView(ctx, user, channel) {
		return MessageAck{}, fmt.Errorf("%w: user %d, channel %d", ErrForbidden, user, channel)
	}
	var ack MessageAck
	for attempt := 0; ; attempt++ {
		err := s.mutate(ctx, user, func(e *userEntry) {
			r := e.record(channel)
			r.LastReadID = message
			r.MentionCount = 0
			r.Mentions = nil
			r.Version++
			e.dirty[channel] = true
			ack = MessageAck{ChannelID: channel, MessageID: message, Version: r.Version}
		})
		if err == nil && !s.ackWriteBehind {
			err = s.commit(ctx, []recKey{{user, channel}})
		}
		if err == nil {
			break
		}
		// Fenced: the entry is dropped; once more claims at the current
		// epoch and reloads (or fails with ErrNotOwner).
		if attempt > 0 || !errors.Is(err, errFencedWrite) {
			return MessageAck{}, err
		}
	}
	s.m.acks.Inc()
	// Mentions in the channel after the marker (user mentions were reset;
	// @everyone entries above the marker still count).
	st, err := s.ChannelState(ctx, user, channel)
	if err != nil {
		return MessageAck{}, err
	}
	ack.MentionCount = st.MentionCount
	return ack, nil
}

// ChannelState returns user's read state in channel, including the
// channel's @everyone/@here mentions after the marker. A channel the user
// cannot see reports no mentions. With Config.Owns, a user this service
// does not own is refused with ErrNotOwner (see view).
func (s *Service) ChannelState(ctx context.Context, user, channel snowflake.ID) (State, error) {
	if err := s.check(); err != nil {
		return State{}, err
	}
	var r Record
	err := s.view(ctx, user, func(e *userEntry) {
		if x, ok := e.recs[channel]; ok {
			r = *x
		}
	})
	if err != nil {
		return State{}, err
	}
	st := State{ChannelID: channel, LastReadID: r.LastReadID, Flags: r.Flags}
	if !s.vis.CanView(ctx, user, channel) {
		return st, nil
	}
	st.MentionCount = int(r.MentionCount)
	// A channel's record is cached only by the member consuming its
	// partition, which changes it; on any other node (read states are
	// sharded by user) it is read from the store each time, so it is never
	// older than the consumer's last flush.
	if s.channels.peek(channel, func(c *channelEntry) {
		st.MentionCount += everyoneAfter(c.rec.Everyone, r.LastReadID, user)
	}) {
		return st, nil
	}
	c, err := s.loadChannel(channel)(ctx)
	if err != nil {
		return st, err
	}
	st.MentionCount += everyoneAfter(c.rec.Everyone, r.LastReadID, user)
	return st, nil
}

// view runs fn on user's entry for a read. With Config.Owns the entry
// read is the one held at the current epoch, claimed as a change claims
// it: a copy loaded by an earlier read, or held under an earlier epoch
// (the user moved away and back without this service seeing the ring in
// between), can miss what another owner wrote meanwhile, and would be
// served as the user's state until the next change reloaded it. The claim
// also fences that other owner, so nothing it still holds lands after
// the load. A user this service does not own is refused with
// ErrNotOwner, which the caller retries on the owner.
func (s *Service) view(ctx context.Context, user snowflake.ID, fn func(*userEntry)) error {
	if s.cfg.Owns == nil {
		return s.users.do(ctx, user, s.loadUser(user), fn)
	}
	return s.mutate(ctx, user, fn)
}

// everyoneAfter counts the @everyone mentions above last not written by
// user.
func everyoneAfter(ms []ChannelMention, last, user snowflake.ID) int {
	i := sort.Search(len(ms), func(i int) bool { return ms[i].MessageID > last })
	n := 0
	for _, m := range ms[i:] {
		if m.AuthorID != user {
			n++
		}
	}
	return n
}

// States returns what READY's read_state carries for user: a state for
// each channel in channels, or, when channels is nil, for each channel the
// user has a record in. Channels the user cannot see are left out.
func (s *Service) States(ctx context.Context, user snowflake.ID, channels []snowflake.ID) ([]State, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if channels == nil {
		err := s.view(ctx, user, func(e *userEntry) {
			for ch := range e.recs {
				channels = append(channels, ch)
			}
		})
		if err != nil {
			return nil, err
		}
		sort.Slice(channels, func(i, j int) bool { return channels[i] < channels[j] })
	}
	out := make([]State, 0, len(channels))
	for _, ch := range channels {
		if !s.vis.CanView(ctx, user, ch) {
			continue
		}
		st, err := s.ChannelState(ctx, user, ch)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}

// Flush writes every change made so far to the store in one Write and then
// marks the event log offsets it covers, so a restart resumes the log
// exactly after what is durable.
func (s *Service) Flush(ctx context.Context) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	// Offsets first: every event below them has been applied to the
	// entries collected next (see the package comment).
	applied := s.cons.snapshot()
	var (
		recs  []Record
		chans []ChannelRecord
	)
	s.beginWrite()
	defer s.endWrite()
	// User records are written through; what is dirty here is what a
	// failed write left (the call that made it was answered an error).
	s.users.each(func(e *userEntry) {
		for ch := range e.dirty {
			r := e.take(ch)
			recs = append(recs, r)
			s.trackUser(e.user, r)
		}
	})
	s.channels.each(func(c *channelEntry) {
		if !c.dirty {
			return
		}
		r := cloneChannel(c.rec)
		chans = append(chans, r)
		c.dirty = false
		s.inflightMu.Lock()
		s.inflightChans[r.ChannelID] = r
		s.inflightMu.Unlock()
	})
	if _, err := s.writeLocked(ctx, recs, chans); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	s.cons.mark(applied)
	return nil
}

// redirty marks entries whose flush failed dirty again.
func (s *Service) redirty(recs []Record, chans []ChannelRecord) {
	ctx := context.Background()
	for _, r := range recs {
		s.users.do(ctx, r.UserID, func(context.Context) (*userEntry, error) {
			return nil, errors.New("evicted")
		}, func(e *userEntry) { e.dirty[r.ChannelID] = true })
	}
	for _, c := range chans {
		s.channels.do(ctx, c.ChannelID, func(context.Context) (*channelEntry, error) {
			return nil, errors.New("evicted")
		}, func(e *channelEntry) { e.dirty = true })
	}
}

// Close flushes and stops accepting calls. It does not close the store.
func (s *Service) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	return s.Flush(ctx)
}
