package migrate

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// VerifyConfig configures Verify.
type VerifyConfig struct {
	// From is the source of the copy. Required.
	From Source
	// To is the destination. Required.
	To store.Messages
	// Samples is the number of channels sampled. Default: 100.
	Samples int
	// Rand picks the samples. Default: a random source.
	Rand *rand.Rand
}

// Mismatch is one read that differed between the two sides.
type Mismatch struct {
	ChannelID snowflake.ID
	Query     store.HistoryQuery
	Detail    string
}

// VerifyReport is what Verify compared.
type VerifyReport struct {
	Channels, Reads, Messages int
	Mismatches                []Mismatch
}

// OK reports whether every sampled read matched.
func (r VerifyReport) OK() bool { return len(r.Mismatches) == 0 }

// Verify samples channels of the source (at random points of the id
// space) and, for each, compares between both sides: the newest page, a
// page before and one around a random message of it, and a page before the
// oldest message seen, 100 messages each.
func Verify(ctx context.Context, cfg VerifyConfig) (VerifyReport, error) {
	var rep VerifyReport
	if cfg.From == nil || cfg.To == nil {
		return rep, fmt.Errorf("migrate: VerifyConfig needs From and To")
	}
	if cfg.Samples <= 0 {
		cfg.Samples = 100
	}
	rng := cfg.Rand
	if rng == nil {
		rng = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	first := uint64(snowflake.FromTime(time.UnixMilli(snowflake.Epoch)))
	last := uint64(snowflake.FromTime(time.Now().Add(24 * time.Hour)))
	seen := map[snowflake.ID]bool{}
	for attempts := 0; len(seen) < cfg.Samples && attempts < 4*cfg.Samples; attempts++ {
		at := snowflake.ID(first + rng.Uint64N(last-first))
		chans, err := cfg.From.MessageChannels(ctx, at, 0, 1)
		if err != nil {
			return rep, fmt.Errorf("migrate: verify: list channels: %w", err)
		}
		if len(chans) == 0 {
			chans, err = cfg.From.MessageChannels(ctx, 0, 0, 1) // wrap around
			if err != nil {
				return rep, fmt.Errorf("migrate: verify: list channels: %w", err)
			}
			if len(chans) == 0 {
				return rep, nil // nothing to verify
			}
		}
		ch := chans[0]
		if seen[ch] {
			continue
		}
		seen[ch] = true
		if err := verifyChannel(ctx, cfg, rng, ch, &rep); err != nil {
			return rep, err
		}
	}
	rep.Channels = len(seen)
	return rep, nil
}

func verifyChannel(ctx context.Context, cfg VerifyConfig, rng *rand.Rand, ch snowflake.ID, rep *VerifyReport) error {
	compare := func(q store.HistoryQuery) ([]store.Message, error) {
		want, err := cfg.From.ListMessages(ctx, ch, q)
		if err != nil {
			return nil, fmt.Errorf("migrate: verify: read source %v: %w", ch, err)
		}
		got, err := cfg.To.ListMessages(ctx, ch, q)
		if err != nil {
			return nil, fmt.Errorf("migrate: verify: read destination %v: %w", ch, err)
		}
		rep.Reads++
		rep.Messages += len(want)
		if d := diff(want, got); d != "" {
			rep.Mismatches = append(rep.Mismatches, Mismatch{ChannelID: ch, Query: q, Detail: d})
		}
		return want, nil
	}
	newest, err := compare(store.HistoryQuery{Limit: 100})
	if err != nil || len(newest) == 0 {
		return err
	}
	pick := newest[rng.IntN(len(newest))].ID
	if _, err := compare(store.HistoryQuery{Before: pick, Limit: 100}); err != nil {
		return err
	}
	if _, err := compare(store.HistoryQuery{Around: pick, Limit: 100}); err != nil {
		return err
	}
	_, err = compare(store.HistoryQuery{Before: newest[len(newest)-1].ID, Limit: 100})
	return err
}

// diff describes the first difference between two pages, or returns "".
func diff(want, got []store.Message) string {
	if len(want) != len(got) {
		return fmt.Sprintf("%d messages in the source, %d in the destination", len(want), len(got))
	}
	for i := range want {
		w, g := normalize(want[i]), normalize(got[i])
		if !reflect.DeepEqual(w, g) {
			return fmt.Sprintf("message %v differs:\n source      %+v\n destination %+v", want[i].ID, w, g)
		}
	}
	return ""
}

// normalize makes messages comparable across stores: times in UTC at
// millisecond precision, empty slices nil.
func normalize(m store.Message) store.Message {
	if !m.EditedAt.IsZero() {
		m.EditedAt = time.UnixMilli(m.EditedAt.UnixMilli()).UTC()
	}
	if len(m.Mentions) == 0 {
		m.Mentions = nil
	}
	if len(m.MentionRoles) == 0 {
		m.MentionRoles = nil
	}
	if len(m.Attachments) == 0 {
		m.Attachments = nil
	}
	return m
}
