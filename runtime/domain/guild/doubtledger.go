package guild

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
	"weak"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/wire"
)

// The ledger of message writes in doubt.
//
// A write in doubt (commitWrites) is completed before its channel's next
// write by the node that wrote it. When the guild (or, for a private
// channel, the channel's ring key) moves to another node first — its node
// cut off, killed, or the ring changed — the new owner never saw the
// write, and its own next write of the channel could commit ahead of the
// old write, which can still apply later (Cassandra replays a logged
// batch, a replica hands on a hint, a quorum read repairs it), behind a
// message readers have read. So the node whose write fell in doubt
// records it in the ledger before it answers the caller, and the owner
// reads the ledger before it writes: a guild's actor once when it starts
// writing, a private channel before each write (nothing tells a node that
// a private channel was served elsewhere meanwhile). What it finds is a
// write in doubt of its own, completed — written again, idempotent for
// its id — and fanned out before the channel's next write; the ledger row
// goes once the write is completed.
//
// The ledger is kept in the message table itself, in a channel of its own
// per guild (per private channel) that no real channel can be: the
// guild's (channel's) id with the top bit set, which a snowflake never
// has. It is written where message writes go, at the same consistency,
// through whatever store the node has (a data node, Cassandra, Pebble),
// with no table to add; each row is one message whose content is the
// write (doubtRecord).
//
// What it does not cover: a write still under way on the old owner when
// the move happens — not yet known to be in doubt, so not yet recorded —
// and an old owner that cannot reach the store to record it. The first
// lasts at most the write's bound (writeTimeout); closing both needs the
// new owner to fence the old one's writes.

// ledgerBit marks a ledger channel: snowflakes are 63-bit.
const ledgerBit = snowflake.ID(1) << 63

// ledgerTimeout bounds a ledger read or write made in an actor step.
const ledgerTimeout = 3 * time.Second

// ledgerChannel is the ledger of a guild, or of a private channel (key is
// its id).
func ledgerChannel(key snowflake.ID) snowflake.ID { return key | ledgerBit }

// doubtRecord is a write in doubt as the ledger keeps it: enough for
// another node to write it again and fan it out.
type doubtRecord struct {
	// Type is the event type (eventType).
	Type    string        `json:"type"`
	Message store.Message `json:"message"`
	// Wire is the dispatch's payload, rendered when the write fell in
	// doubt (absent when rendering failed: the write is completed
	// without a fan-out).
	Wire json.RawMessage `json:"wire,omitempty"`
}

func newDoubtRecord(typ string, m store.Message, wm wire.Message, renderErr error) doubtRecord {
	r := doubtRecord{Type: typ, Message: m}
	if renderErr == nil {
		r.Wire = mustJSON(wm)
	}
	return r
}

// putDoubt records rec in key's ledger.
func (s *Service) putDoubt(ctx context.Context, key snowflake.ID, rec doubtRecord) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	row := store.Message{ID: rec.Message.ID, ChannelID: ledgerChannel(key), AuthorID: rec.Message.AuthorID, Content: string(b)}
	if err := s.deps.Store.PutMessage(ctx, row); err != nil {
		return fmt.Errorf("ledger of %d: record write in doubt %d: %w", key, rec.Message.ID, err)
	}
	return nil
}

// dropDoubts removes ids from key's ledger.
func (s *Service) dropDoubts(ctx context.Context, key snowflake.ID, ids []snowflake.ID) error {
	for _, id := range ids {
		err := s.deps.Store.DeleteMessage(ctx, ledgerChannel(key), id)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("ledger of %d: drop write in doubt %d: %w", key, id, err)
		}
	}
	return nil
}

// doubts reads key's ledger, oldest write first.
func (s *Service) doubts(ctx context.Context, key snowflake.ID) ([]doubtRecord, error) {
	rows, err := s.deps.Store.ListMessages(ctx, ledgerChannel(key), store.HistoryQuery{Limit: 100})
	if err != nil {
		return nil, fmt.Errorf("ledger of %d: %w: %w", key, ErrUnavailable, err)
	}
	out := make([]doubtRecord, 0, len(rows))
	for _, row := range rows {
		var r doubtRecord
		if err := json.Unmarshal([]byte(row.Content), &r); err != nil || r.Message.ID != row.ID {
			s.log.Warn("ledger row unreadable; dropped", "key", key, "id", row.ID, "err", err)
			_ = s.dropDoubts(ctx, key, []snowflake.ID{row.ID})
			continue
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b doubtRecord) int { return compareIDs(a.Message.ID, b.Message.ID) })
	return out, nil
}

func compareIDs(a, b snowflake.ID) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// recovered is the write in doubt of channel made of the ledger's records
// (oldest first) and, ahead of them, the write in doubt this node already
// holds for the channel when the ledger does not have it (its record
// failed): one write that completes them all in id order and fans them
// out. publish fans one record out.
func (s *Service) recovered(key, channel snowflake.ID, recs []doubtRecord, held *batchedWrite,
	publish func(ctx context.Context, r doubtRecord) error) *batchedWrite {
	w := &batchedWrite{ctx: context.Background(), channel: channel, recorded: true}
	ids := make([]snowflake.ID, len(recs))
	for i, r := range recs {
		ids[i] = r.Message.ID
	}
	w.commit = func(ctx context.Context) error {
		if held != nil {
			if err := held.retry(); err != nil {
				return err
			}
		}
		for _, r := range recs {
			if err := s.putMessage(ctx, r.Type, r.Message); err != nil {
				return err
			}
		}
		return nil
	}
	w.forget = func(ctx context.Context) error { return s.dropDoubts(ctx, key, ids) }
	w.late = func(a *Actor, ctx context.Context) error {
		var errs []error
		if held != nil {
			errs = append(errs, held.late(a, ctx))
		}
		for _, r := range recs {
			errs = append(errs, publish(ctx, r))
		}
		return errors.Join(errs...)
	}
	return w
}

// record writes the records of the writes in doubt ws (all of one actor
// step) to the ledger, together, within ledgerTimeout; a write whose
// record failed is recorded again when its settling fails (settle).
func (s *Service) record(key snowflake.ID, ws []*batchedWrite, recs []doubtRecord) {
	ctx, cancel := context.WithTimeout(context.Background(), ledgerTimeout)
	defer cancel()
	errs := make([]error, len(ws))
	done := make(chan int, len(ws))
	for i := range ws {
		go func() {
			errs[i] = s.putDoubt(ctx, key, recs[i])
			done <- i
		}()
	}
	for range ws {
		i := <-done
		w := ws[i]
		// The row may exist even when the write failed: it is dropped
		// once the write is completed either way.
		if w.forget == nil {
			id := recs[i].Message.ID
			w.forget = func(ctx context.Context) error { return s.dropDoubts(ctx, key, []snowflake.ID{id}) }
		}
		w.recorded = errs[i] == nil
		if errs[i] != nil {
			s.log.Warn("message write in doubt not recorded in the ledger; retried", "key", key, "channel_id", w.channel, "err", errs[i])
		}
	}
}

// recordDoubts records ws, writes of this actor's step that fell in
// doubt, in the guild's ledger (rendering each in the actor).
func (a *Actor) recordDoubts(ws []*batchedWrite) {
	var keep []*batchedWrite
	var recs []doubtRecord
	for _, w := range ws {
		if w.describe == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), ledgerTimeout)
		rec := w.describe(a, ctx)
		w.messageID = rec.Message.ID
		cancel()
		keep, recs = append(keep, w), append(recs, rec)
	}
	if len(keep) > 0 {
		a.svc.record(a.id, keep, recs)
	}
}

// loadDoubts reads the guild's ledger when this actor has not yet, and
// holds what it finds as the writes in doubt of their channels, settled
// before their channels' next writes like those of this node. A ledger
// that cannot be read leaves the actor's writes refused (ErrUnavailable):
// the previous owner may have left a write in doubt.
func (a *Actor) loadDoubts() error {
	if a.svc.doubt.readBy(a.id, a) {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), ledgerTimeout)
	defer cancel()
	recs, err := a.svc.doubts(ctx, a.id)
	if err != nil {
		return fmt.Errorf("guild %d: writes in doubt: %w", a.id, err)
	}
	byChannel := map[snowflake.ID][]doubtRecord{}
	for _, r := range recs {
		byChannel[r.Message.ChannelID] = append(byChannel[r.Message.ChannelID], r)
	}
	for ch, rs := range byChannel {
		held := a.svc.doubt.get(a.id, ch)
		if held != nil && slices.ContainsFunc(rs, func(r doubtRecord) bool { return r.Message.ID == held.messageID }) {
			held = nil // the ledger has it
		}
		w := a.svc.recovered(a.id, ch, rs, held, func(ctx context.Context, r doubtRecord) error {
			return a.publishRecord(ctx, r)
		})
		a.svc.doubt.put(a.id, ch, w)
		a.svc.settleLater(a.id, ch, w, 0)
		a.svc.log.Info("message writes in doubt found in the guild's ledger; completed before the channel's next write",
			"guild_id", a.id, "channel_id", ch, "writes", len(rs))
	}
	a.svc.doubt.markRead(a.id, a)
	return nil
}

// publishRecord fans out a completed write of the ledger.
func (a *Actor) publishRecord(ctx context.Context, r doubtRecord) error {
	if len(r.Wire) == 0 {
		return fmt.Errorf("message %d: no payload recorded", r.Message.ID)
	}
	var wm wire.Message
	if err := json.Unmarshal(r.Wire, &wm); err != nil {
		return fmt.Errorf("message %d: %w", r.Message.ID, err)
	}
	a.publishMessage(ctx, r.Type, wm)
	return nil
}

// readBy reports whether actor a (guild's current actor) has read the
// guild's ledger. The table holds the actor weakly: a new actor of the
// guild (after an unload, or the guild's return from another node)
// reads it again.
func (d *doubtTable) readBy(guild snowflake.ID, a *Actor) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.read[guild]
	return ok && p.Value() == a
}

func (d *doubtTable) markRead(guild snowflake.ID, a *Actor) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.read == nil {
		d.read = map[snowflake.ID]weak.Pointer[Actor]{}
	}
	d.read[guild] = weak.Make(a)
}
