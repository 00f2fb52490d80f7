// Package placement puts a live stream's viewers on few gateways: the
// stream directory (every stream's viewers and width, every gateway's
// load, from the viewer reports the gateways write to the board every
// 5 s) and the edge's choice of gateway for GET /v1/streams/{id}/live,
// consistent hashing of the stream id with bounded load over the
// stream's k gateways.
//
// Why: a comment costs one backbone copy per gateway its stream's
// viewers sit on. Spread at random over G gateways, a stream of V
// viewers touches G·(1-(1-1/G)^V) of them (632 of 1,000 for a
// 1,000-viewer stream); placed by affinity it touches
// k = max(1, ceil(V / 25,000)).
package placement

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
)

// Defaults of the directory.
const (
	// PerGateway is how many of one stream's viewers a gateway takes
	// before the stream widens to another.
	PerGateway = 25_000
	// ShrinkAfter is how long a stream's viewers must fit fewer gateways
	// before its width shrinks; widening is at once.
	ShrinkAfter = 10 * time.Minute
	// RefreshInterval is how often the directory reads the reports (the
	// gateways write them every 5 s).
	RefreshInterval = 5 * time.Second
)

// WidthKey is the board key an operator sets to pre-size the streams of
// a creator (a decimal k): a creator whose audience arrives all at once
// starts wide instead of widening as the reports come in.
func WidthKey(creator snowflake.ID) string { return "live/width/creator/" + creator.String() }

// widthPrefix is the prefix of WidthKey.
const widthPrefix = "live/width/creator/"

// streamsPrefix is where the API pushes stream records (live.Stream).
const streamsPrefix = "live/streams/"

// DirectoryConfig configures a Directory. Zero fields take the defaults.
type DirectoryConfig struct {
	PerGateway  int64
	ShrinkAfter time.Duration
	Refresh     time.Duration
	// Now is the clock (tests inject one).
	Now func() time.Time
}

// Directory is the stream directory as one edge sees it. It keeps what
// the last good read of the board said: while the board is unreachable
// placements keep using it, and a stream it never heard of has width 1.
type Directory struct {
	b   live.Board
	cfg DirectoryConfig

	mu      sync.Mutex
	streams map[string]*streamInfo
	loads   map[string]int64 // gateway -> viewers it reported
	presets map[snowflake.ID]int
	// preset is the preset width of each stream whose creator has one,
	// for streams nobody watches yet.
	preset map[string]int
	fresh  bool // the last refresh succeeded
	at     time.Time
}

type streamInfo struct {
	viewers int64
	width   int
	// lowSince is when the viewers first fit fewer gateways than width
	// (zero: they do not).
	lowSince time.Time
	creator  snowflake.ID
	seen     bool // in the last refresh
}

// NewDirectory returns a directory on b; Run or Refresh fills it.
func NewDirectory(b live.Board, cfg DirectoryConfig) *Directory {
	if cfg.PerGateway <= 0 {
		cfg.PerGateway = PerGateway
	}
	if cfg.ShrinkAfter <= 0 {
		cfg.ShrinkAfter = ShrinkAfter
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = RefreshInterval
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Directory{b: b, cfg: cfg, streams: map[string]*streamInfo{}, loads: map[string]int64{}, presets: map[snowflake.ID]int{}}
}

// Run refreshes the directory every Refresh until ctx ends. A failed
// read keeps the last good state (logged by the caller through err).
func (d *Directory) Run(ctx context.Context, onErr func(error)) error {
	t := time.NewTicker(d.cfg.Refresh)
	defer t.Stop()
	for {
		if err := d.Refresh(ctx); err != nil && onErr != nil && ctx.Err() == nil {
			onErr(err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Refresh reads the viewer reports (and creators' preset widths) once.
// On error nothing changes.
func (d *Directory) Refresh(ctx context.Context) error {
	reports, err := d.b.List(ctx, "live/viewers/")
	if err != nil {
		d.mu.Lock()
		d.fresh = false
		d.mu.Unlock()
		return fmt.Errorf("stream directory: viewer reports: %w", err)
	}
	presetKV, err := d.b.List(ctx, widthPrefix)
	if err != nil {
		d.mu.Lock()
		d.fresh = false
		d.mu.Unlock()
		return fmt.Errorf("stream directory: preset widths: %w", err)
	}
	presets := map[snowflake.ID]int{}
	for k, v := range presetKV {
		c, err1 := snowflake.Parse(strings.TrimPrefix(k, widthPrefix))
		n, err2 := strconv.Atoi(strings.TrimSpace(string(v)))
		if err1 == nil && err2 == nil && n > 0 {
			presets[c] = n
		}
	}
	now := d.cfg.Now()
	viewers := map[string]int64{}
	loads := map[string]int64{}
	for k, v := range reports {
		rest := strings.TrimPrefix(k, "live/viewers/")
		stream, gw, ok := strings.Cut(rest, "/")
		if !ok {
			continue
		}
		var r live.ViewerReport
		if json.Unmarshal(v, &r) != nil || r.Count < 0 || now.Sub(time.UnixMilli(r.At)) >= live.ViewerTTL {
			continue
		}
		viewers[stream] += r.Count
		loads[gw] += r.Count
	}
	// The creator of a stream matters only when some creator has a
	// preset; then the stream records say whose each stream is.
	var creators map[string]snowflake.ID
	if len(presets) > 0 {
		recs, err := d.b.List(ctx, streamsPrefix)
		if err != nil {
			d.mu.Lock()
			d.fresh = false
			d.mu.Unlock()
			return fmt.Errorf("stream directory: stream records: %w", err)
		}
		creators = make(map[string]snowflake.ID, len(recs))
		for k, v := range recs {
			var s live.Stream
			if json.Unmarshal(v, &s) == nil {
				creators[strings.TrimPrefix(k, streamsPrefix)] = s.CreatorID
			}
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.presets, d.loads, d.fresh, d.at = presets, loads, true, now
	d.preset = map[string]int{}
	for id, c := range creators {
		if p := presets[c]; p > 0 {
			d.preset[id] = p
		}
	}
	for _, s := range d.streams {
		s.seen = false
	}
	for id, n := range viewers {
		s := d.streams[id]
		if s == nil {
			s = &streamInfo{}
			d.streams[id] = s
		}
		s.viewers, s.seen = n, true
		if c, ok := creators[id]; ok {
			s.creator = c
		}
		d.resizeLocked(s, now)
	}
	for id, s := range d.streams {
		if !s.seen {
			// No gateway reports viewers any more: the stream is over or
			// empty, and the next viewer starts it afresh.
			delete(d.streams, id)
		}
	}
	return nil
}

// resizeLocked applies the width rule: wider at once, narrower only after
// the viewers have fit the narrower width for ShrinkAfter.
func (d *Directory) resizeLocked(s *streamInfo, now time.Time) {
	need := int(max(1, (s.viewers+d.cfg.PerGateway-1)/d.cfg.PerGateway))
	if p := d.presets[s.creator]; s.creator != 0 && p > need {
		need = p
	}
	switch {
	case need >= s.width:
		s.width, s.lowSince = need, time.Time{}
	case s.lowSince.IsZero():
		s.lowSince = now
	case now.Sub(s.lowSince) >= d.cfg.ShrinkAfter:
		s.width, s.lowSince = need, time.Time{}
	}
}

// Width returns how many gateways stream spreads over. A stream without
// reports has its creator's preset width, else 1.
func (d *Directory) Width(stream string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := d.streams[stream]; s != nil && s.width > 0 {
		return s.width
	}
	if p := d.preset[stream]; p > 0 {
		return p
	}
	return 1
}

// Viewers returns the stream's viewers as last reported.
func (d *Directory) Viewers(stream string) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := d.streams[stream]; s != nil {
		return s.viewers
	}
	return 0
}

// Loads returns a copy of each gateway's reported viewers.
func (d *Directory) Loads() map[string]int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]int64, len(d.loads))
	for k, v := range d.loads {
		out[k] = v
	}
	return out
}

// Fresh reports whether the last refresh succeeded, and when the state
// in use was read.
func (d *Directory) Fresh() (bool, time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.fresh, d.at
}

// SetWidth pre-sets the width of creator's streams (k <= 0 removes it).
func SetWidth(ctx context.Context, b live.Board, creator snowflake.ID, k int) error {
	if k <= 0 {
		return b.Delete(ctx, WidthKey(creator))
	}
	return b.Put(ctx, WidthKey(creator), []byte(strconv.Itoa(k)), registry.Persistent)
}
