package router

import (
	"hash/fnv"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/live"
)

// sampler is one stream's sampled mode: its comment rate per second, the
// mode with its hysteresis, and while sampled the tiering of each batch's
// comments. It belongs to the goroutine of the stream's partition.
//
// The rate is counted in whole seconds of the router's clock. The stream
// enters sampled mode once every second of a run of SampledEnterFor had
// more than SampledEnterRate comments, and leaves it once every second of
// a run of SampledLeaveFor had fewer than SampledLeaveRate: a stream that
// hovers between 30 and 50 a second keeps whichever mode it is in, and
// one second on the other side of a threshold restarts the run, so the
// mode cannot flap faster than once per 10 s in and 30 s out.
type sampler struct {
	sec        int64     // the second being counted (Unix s of the clock)
	count      int       // comments counted in sec
	aboveSince time.Time // start of the run of seconds above the enter rate; zero: none
	belowSince time.Time // start of the run of seconds below the leave rate; zero: none
	sampled    bool

	// Tiering, while sampled.
	pinTokens, sampleTokens float64
	tokensAt                time.Time
	lastSampled             map[snowflake.ID]time.Time // author → when last drawn into the sample
	texts                   map[uint64]time.Time       // normalized text → last seen (duplicate penalty)
	removals                map[snowflake.ID]int       // author → retractions seen on this stream
	rest                    []int64                    // seqs tagged rest, ascending, bounded (restKeep)
	pulled                  map[int64]bool             // held comments taken down before their tiering
	pruned                  time.Time
}

// restKeep bounds the rest-tier seqs a sampler remembers, to tag a
// retraction of one (16 s at 4,000 comments a second; an older rest
// comment's retraction goes out untagged, to the viewers that were sent
// anything from its seq on, as on a stream that is not sampled).
const restKeep = 1 << 16

func newSampler() *sampler {
	return &sampler{lastSampled: map[snowflake.ID]time.Time{}, texts: map[uint64]time.Time{}, removals: map[snowflake.ID]int{}}
}

// countAt records one comment at now and reports whether the mode
// changed (seconds before now's closed).
func (s *sampler) countAt(now time.Time) (changed bool) {
	changed = s.tick(now)
	s.count++
	return changed
}

// tick closes the seconds before now's and reports whether the mode
// changed.
func (s *sampler) tick(now time.Time) (changed bool) {
	sec := now.Unix()
	if s.sec == 0 {
		s.sec = sec
		return false
	}
	was := s.sampled
	for s.sec < sec {
		s.closeSecond(s.sec, s.count)
		s.count = 0
		s.sec++
		if skip := sec - int64(live.SampledLeaveFor/time.Second) - 2; s.sec < skip {
			// A long silence: only its last seconds can decide a run
			// (every second of it is below the leave rate), so the ones
			// before are counted as one.
			s.closeSecond(s.sec, 0)
			s.sec = skip
		}
	}
	return s.sampled != was
}

// closeSecond applies the count of second sec to the runs and the mode.
func (s *sampler) closeSecond(sec int64, n int) {
	start := time.Unix(sec, 0)
	if n > live.SampledEnterRate {
		if s.aboveSince.IsZero() {
			s.aboveSince = start
		}
	} else {
		s.aboveSince = time.Time{}
	}
	if n < live.SampledLeaveRate {
		if s.belowSince.IsZero() {
			s.belowSince = start
		}
	} else {
		s.belowSince = time.Time{}
	}
	end := start.Add(time.Second)
	if !s.sampled && !s.aboveSince.IsZero() && end.Sub(s.aboveSince) >= live.SampledEnterFor {
		s.sampled = true
		s.pinTokens, s.sampleTokens, s.tokensAt = 0, 0, end
	}
	if s.sampled && !s.belowSince.IsZero() && end.Sub(s.belowSince) >= live.SampledLeaveFor {
		s.sampled = false
	}
}

// candidate is one comment of a batch competing for the sample.
type candidate struct {
	i     int // index in the batch
	score float64
}

// tierBatch tags the comments of a batch of a sampled stream pinned,
// sample or rest (feats[i] are evs[i]'s author features, nil unknown).
// Pinned: the creator's and moderators', up to PinnedRate a second.
// Sample: the best scored of the others (and of moderators' past the
// pinned cap), as many as SampleRate a second has earned since the last
// batch, at most one per author per SampleAuthorGap. The rest: rest.
// Shadow comments are rest: only their author sees them anyway.
//
// trustedOnly (the classifier lags) leaves only trusted authors in the
// running for the sample: the stream degrades to safer, not to
// unfiltered, until the classifier catches up.
func (s *sampler) tierBatch(now time.Time, evs []live.Event, feats []*live.Features, trustedOnly bool) {
	dt := now.Sub(s.tokensAt).Seconds()
	if s.tokensAt.IsZero() || dt < 0 {
		dt = 0
	}
	s.tokensAt = now
	// Bursts are bounded: half a second of sample, a second of pinned.
	s.sampleTokens = min(s.sampleTokens+dt*live.SampleRate, live.SampleRate/2)
	s.pinTokens = min(s.pinTokens+dt*live.PinnedRate, live.PinnedRate)
	s.prune(now)
	for seq := range s.pulled {
		if seq < evs[0].Seq {
			delete(s.pulled, seq) // its comment went out before it was held
		}
	}
	var cands []candidate
	for i := range evs {
		ev := &evs[i]
		if ev.Kind != live.KindComment {
			continue
		}
		c := ev.Comment
		ev.Tier = live.TierRest
		f := feats[i]
		dup := s.seen(c.Text, now)
		if s.pulled[ev.Seq] {
			delete(s.pulled, ev.Seq)
			continue
		}
		if c.Shadow {
			continue
		}
		if f != nil && f.Moderator && s.pinTokens >= 1 {
			s.pinTokens--
			ev.Tier = live.TierPinned
			continue
		}
		if t, ok := s.lastSampled[c.Author.ID]; ok && now.Sub(t) < live.SampleAuthorGap {
			continue
		}
		if trustedOnly && !s.trusted(c.Author.ID, f) {
			continue
		}
		cands = append(cands, candidate{i: i, score: s.score(c, f, dup)})
	}
	n := int(s.sampleTokens)
	if n > 0 && len(cands) > 0 {
		sort.SliceStable(cands, func(a, b int) bool { return cands[a].score > cands[b].score })
		taken := 0
		for _, cd := range cands {
			if taken == n {
				break
			}
			c := evs[cd.i].Comment
			if t, ok := s.lastSampled[c.Author.ID]; ok && now.Sub(t) < live.SampleAuthorGap {
				continue // the same author twice in one batch
			}
			evs[cd.i].Tier = live.TierSample
			s.lastSampled[c.Author.ID] = now
			taken++
		}
		s.sampleTokens -= float64(taken)
	}
	for i := range evs {
		if evs[i].Kind == live.KindComment && evs[i].Tier == live.TierRest {
			if len(s.rest) == restKeep {
				s.rest = slices.Delete(s.rest, 0, restKeep/4)
			}
			s.rest = append(s.rest, evs[i].Seq)
		}
	}
}

// TrustedAge is the account age from which an author is trusted while
// the classifier lags.
const TrustedAge = 30 * 24 * time.Hour

// trusted: a moderator, or an account at least TrustedAge old that is not
// a bot and has had nothing taken down on this stream.
func (s *sampler) trusted(author snowflake.ID, f *live.Features) bool {
	if f == nil {
		return false
	}
	if f.Moderator {
		return true
	}
	return !f.Bot && f.AccountAgeS >= int64(TrustedAge/time.Second) && s.removals[author] == 0
}

// score rates a comment from cheap features: higher is better. Author
// standing counts most (a moderator past the pinned cap first, then
// account age up to a year; a bot or an author whose comments were taken
// down on this stream loses), then the text (a near-empty one loses, a
// duplicate of a recent one loses more).
func (s *sampler) score(c *live.Comment, f *live.Features, dup bool) float64 {
	sc := 0.0
	if f != nil {
		if f.Moderator {
			sc += 10
		}
		sc += 2 * min(float64(f.AccountAgeS)/(365*86400), 1)
		if f.Bot {
			sc -= 3
		}
	}
	sc -= 1.5 * float64(min(s.removals[c.Author.ID], 3))
	switch n := utf8.RuneCountInString(c.Text); {
	case n < 3:
		sc--
	case n >= 10 && n <= 120:
		sc += 0.5
	}
	if dup {
		sc -= 2
	}
	return sc
}

// seen reports whether text (normalized: case and spacing) was seen on
// the stream in the last SampleAuthorGap, and records it.
func (s *sampler) seen(text string, now time.Time) bool {
	h := fnv.New64a()
	h.Write([]byte(strings.Join(strings.Fields(strings.ToLower(text)), " ")))
	k := h.Sum64()
	t, ok := s.texts[k]
	s.texts[k] = now
	return ok && now.Sub(t) < live.SampleAuthorGap
}

// retracted tags a retraction of a rest-tier comment rest (gateways send
// it only to the viewers that were shown the comment) and counts the
// author's removal, in either mode.
func (s *sampler) retracted(ev *live.Event) {
	if s.isRest(ev.Retract.Seq) {
		ev.Tier = live.TierRest
	}
	s.removals[ev.Retract.AuthorID]++
}

// pull keeps a held comment, taken down before its tiering, out of the
// pinned and sample tiers.
func (s *sampler) pull(seq int64) {
	if s.pulled == nil {
		s.pulled = map[int64]bool{}
	}
	s.pulled[seq] = true
}

// isRest reports whether the comment at seq was tagged rest.
func (s *sampler) isRest(seq int64) bool {
	_, ok := slices.BinarySearch(s.rest, seq)
	return ok
}

// prune drops what the per-author gap and the duplicate window no longer
// need, every 10 s.
func (s *sampler) prune(now time.Time) {
	if now.Sub(s.pruned) < 10*time.Second {
		return
	}
	s.pruned = now
	for a, t := range s.lastSampled {
		if now.Sub(t) >= live.SampleAuthorGap {
			delete(s.lastSampled, a)
		}
	}
	for k, t := range s.texts {
		if now.Sub(t) >= live.SampleAuthorGap {
			delete(s.texts, k)
		}
	}
}
