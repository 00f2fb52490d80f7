package filter

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
)

// Board keys. Everything the filter needs lives under Prefix.
const (
	Prefix = "live/"
	// KeyGlobal holds the global Rules (JSON).
	KeyGlobal = Prefix + "rules/global"
	// creatorRules + <creator> holds a creator's CreatorRules.
	creatorRules = Prefix + "rules/creator/"
	// streams + <stream> holds the stream record, pushed on every change.
	streams = Prefix + "streams/"
	// Ban keys: bans/user/<user>, bans/creator/<creator>/<user>,
	// bans/stream/<stream>/<user>.
	banUser    = Prefix + "bans/user/"
	banCreator = Prefix + "bans/creator/"
	banStream  = Prefix + "bans/stream/"
)

// StreamKey is the board key of a stream's pushed record.
func StreamKey(id snowflake.ID) string { return streams + id.String() }

// UserBanKey bans user from every stream.
func UserBanKey(user snowflake.ID) string { return banUser + user.String() }

// CreatorBanKey bans user from all of creator's streams.
func CreatorBanKey(creator, user snowflake.ID) string {
	return banCreator + creator.String() + "/" + user.String()
}

// StreamBanKey bans user from one stream.
func StreamBanKey(stream, user snowflake.ID) string {
	return banStream + stream.String() + "/" + user.String()
}

// CreatorRulesKey is the board key of a creator's rules.
func CreatorRulesKey(creator snowflake.ID) string { return creatorRules + creator.String() }

// Rules are the global rules.
type Rules struct {
	BlockedTerms []string `json:"blocked_terms,omitempty"`
	// AllowLinks turns the link rule off (links are blocked for everyone
	// but the creator and moderators by default).
	AllowLinks bool `json:"allow_links,omitempty"`
	// MinAccountAgeSeconds rejects accounts younger than this (0: off).
	MinAccountAgeSeconds int `json:"min_account_age_seconds,omitempty"`
	// SpamTerms shadow-accept rather than reject.
	SpamTerms []string `json:"spam_terms,omitempty"`
}

// CreatorRules apply to all of one creator's streams.
type CreatorRules struct {
	BlockedTerms []string `json:"blocked_terms,omitempty"`
}

// Directory is the local copy of the board's rules, bans and stream
// records, kept current by a watch: a change on any API instance reaches
// every other within the board's propagation time (etcd: milliseconds).
type Directory struct {
	log *slog.Logger

	mu       sync.RWMutex
	global   compiled
	creators map[snowflake.ID][]string // normalized terms
	bans     map[string]bool
	streams  map[snowflake.ID]live.Stream
	synced   chan struct{}
	once     sync.Once
}

type compiled struct {
	rules Rules
	terms []string
	spam  []string
}

// NewDirectory returns an empty Directory; Run fills it.
func NewDirectory(log *slog.Logger) *Directory {
	if log == nil {
		log = slog.Default()
	}
	return &Directory{log: log, creators: map[snowflake.ID][]string{}, bans: map[string]bool{},
		streams: map[snowflake.ID]live.Stream{}, synced: make(chan struct{})}
}

// Synced is closed once the first snapshot is applied.
func (d *Directory) Synced() <-chan struct{} { return d.synced }

// Run follows the board until ctx ends, re-watching after the watch ends.
func (d *Directory) Run(ctx context.Context, b live.Board) error {
	for {
		ch, err := b.WatchKV(ctx, Prefix)
		if err == nil {
			for u := range ch {
				d.apply(u)
			}
		} else {
			d.log.Warn("live rules watch failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

func (d *Directory) apply(u registry.KVUpdate) {
	if u.Lost {
		return
	}
	d.mu.Lock()
	if u.Snapshot {
		d.global = compiled{}
		d.creators = map[snowflake.ID][]string{}
		d.bans = map[string]bool{}
		d.streams = map[snowflake.ID]live.Stream{}
	}
	for _, c := range u.Changes {
		d.applyLocked(c)
	}
	d.mu.Unlock()
	if u.Snapshot {
		d.once.Do(func() { close(d.synced) })
	}
}

func (d *Directory) applyLocked(c registry.KVChange) {
	switch {
	case c.Key == KeyGlobal:
		var r Rules
		if !c.Deleted {
			if err := json.Unmarshal(c.Value, &r); err != nil {
				d.log.Warn("bad global live rules", "err", err)
				return
			}
		}
		d.global = compiled{rules: r, terms: compile(r.BlockedTerms), spam: compile(r.SpamTerms)}
	case strings.HasPrefix(c.Key, creatorRules):
		id, err := snowflake.Parse(c.Key[len(creatorRules):])
		if err != nil {
			return
		}
		var r CreatorRules
		if c.Deleted || json.Unmarshal(c.Value, &r) != nil {
			delete(d.creators, id)
			return
		}
		d.creators[id] = compile(r.BlockedTerms)
	case strings.HasPrefix(c.Key, Prefix+"bans/"):
		if c.Deleted {
			delete(d.bans, c.Key)
		} else {
			d.bans[c.Key] = true
		}
	case strings.HasPrefix(c.Key, streams):
		id, err := snowflake.Parse(c.Key[len(streams):])
		if err != nil {
			return
		}
		var s live.Stream
		if c.Deleted || json.Unmarshal(c.Value, &s) != nil || s.ID != id {
			delete(d.streams, id)
			return
		}
		d.rememberLocked(s)
	}
}

// Remember records a stream this instance just saved, ahead of the watch
// delivering it; a copy older than the one held (a lower Version) is
// ignored, here and from the watch.
func (d *Directory) Remember(s live.Stream) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.rememberLocked(s)
}

func (d *Directory) rememberLocked(s live.Stream) {
	if cur, ok := d.streams[s.ID]; ok && cur.Version > s.Version {
		return
	}
	d.streams[s.ID] = s
}

func compile(terms []string) []string {
	var out []string
	for _, t := range terms {
		if n := term(t); n != "" {
			out = append(out, n)
		}
	}
	return out
}

// Stream returns the pushed record of a stream, if the board has it.
func (d *Directory) Stream(id snowflake.ID) (live.Stream, bool) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	s, ok := d.streams[id]
	return s, ok
}

// Banned reports whether user is banned from stream s (user, creator or
// stream level).
func (d *Directory) Banned(s *live.Stream, user snowflake.ID) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.bans[UserBanKey(user)] || d.bans[CreatorBanKey(s.CreatorID, user)] || d.bans[StreamBanKey(s.ID, user)]
}

// snapshot returns what a check needs under one read lock.
func (d *Directory) snapshot(creator snowflake.ID) (compiled, []string) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.global, d.creators[creator]
}
