package filter

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/domain/live"
)

// Reasons a comment is rejected, as the API reports them.
const (
	ReasonBanned       = "banned"
	ReasonBlockedTerm  = "blocked_term"
	ReasonLink         = "link"
	ReasonAccountAge   = "account_too_new"
	ReasonRateLimited  = "rate_limited"
	ReasonShadowDup    = "duplicate_text"
	ReasonShadowSpam   = "spam_term"
	DefaultInterval    = 2 * time.Second
	duplicateWindow    = 5 * time.Minute
	duplicateKeyPrefix = "live:dup:"
	rateKeyPrefix      = "live:rate:"
)

// Decision is the outcome of a check.
type Decision struct {
	// Reject is set when the comment must not be accepted.
	Reject string
	// Detail explains the rejection to the author (the blocked term's
	// rule, never the term list).
	Detail string
	// RetryAfter is set with ReasonRateLimited.
	RetryAfter time.Duration
	// Shadow is set when the comment is accepted for its author only; the
	// reason is ShadowReason.
	Shadow       bool
	ShadowReason string
}

// Filter checks comments.
type Filter struct {
	dir      *Directory
	counters live.Counters
	now      func() time.Time
}

// New returns a Filter reading rules from dir and counting in c.
func New(dir *Directory, c live.Counters) *Filter {
	return &Filter{dir: dir, counters: c, now: time.Now}
}

// Check decides on text by author on stream s. Creator and moderators are
// exempt from the rate limit, slow mode, the link rule and the account-age
// rule. An error means the counters could not be reached: the caller
// decides whether to fail open.
func (f *Filter) Check(ctx context.Context, s *live.Stream, author store.User, text string) (Decision, error) {
	now := f.now()
	mod := s.IsModerator(author.ID)
	if f.dir.Banned(s, author.ID) {
		return Decision{Reject: ReasonBanned, Detail: "You are banned from this stream."}, nil
	}
	global, creatorTerms := f.dir.snapshot(s.CreatorID)
	if !mod && global.rules.MinAccountAgeSeconds > 0 && !author.CreatedAt.IsZero() &&
		now.Sub(author.CreatedAt) < time.Duration(global.rules.MinAccountAgeSeconds)*time.Second {
		return Decision{Reject: ReasonAccountAge, Detail: fmt.Sprintf("Accounts must be at least %d seconds old to comment.", global.rules.MinAccountAgeSeconds)}, nil
	}
	n := Normalize(text)
	if matches(n, global.terms) {
		return Decision{Reject: ReasonBlockedTerm, Detail: "Your comment contains a term that is blocked everywhere."}, nil
	}
	if matches(n, creatorTerms) {
		return Decision{Reject: ReasonBlockedTerm, Detail: "Your comment contains a term this creator has blocked."}, nil
	}
	if matches(n, compile(s.BlockedTerms)) {
		return Decision{Reject: ReasonBlockedTerm, Detail: "Your comment contains a term blocked on this stream."}, nil
	}
	if !mod && !global.rules.AllowLinks && hasLink(text) {
		return Decision{Reject: ReasonLink, Detail: "Links are not allowed in comments."}, nil
	}
	if !mod {
		interval := DefaultInterval
		if s.SlowModeSeconds > 0 {
			interval = time.Duration(s.SlowModeSeconds) * time.Second
		}
		key := rateKeyPrefix + s.ID.String() + ":" + author.ID.String() + ":" + interval.String()
		d, err := f.counters.Take(ctx, key, 1, interval, now)
		if err != nil {
			return Decision{}, fmt.Errorf("filter: rate limit: %w", err)
		}
		if !d.Allowed {
			return Decision{Reject: ReasonRateLimited, RetryAfter: max(d.RetryAfter, time.Millisecond),
				Detail: fmt.Sprintf("You can comment once every %s on this stream.", interval)}, nil
		}
	}
	if matches(n, global.spam) {
		return Decision{Shadow: true, ShadowReason: ReasonShadowSpam}, nil
	}
	h := fnv.New64a()
	h.Write([]byte(strings.TrimSpace(n)))
	key := fmt.Sprintf("%s%s:%s:%x", duplicateKeyPrefix, s.ID, author.ID, h.Sum64())
	count, err := f.counters.Incr(ctx, key, 1, duplicateWindow)
	if err != nil {
		return Decision{}, fmt.Errorf("filter: duplicate check: %w", err)
	}
	if count > 1 && !mod {
		return Decision{Shadow: true, ShadowReason: ReasonShadowDup}, nil
	}
	return Decision{}, nil
}

func matches(normalized string, terms []string) bool {
	for _, t := range terms {
		if strings.Contains(normalized, t) {
			return true
		}
	}
	return false
}
