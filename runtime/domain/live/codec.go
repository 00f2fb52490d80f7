package live

import (
	"encoding/json"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// maxRecord bounds every decoded value: a comment is at most 200
// characters, so anything much larger is not one of ours.
const maxRecord = 64 << 10

// maxBatch bounds a relay batch (a router batch holds at most a few
// hundred events).
const maxBatch = 4 << 20

// LogRecord is the value of a record on the comments topic. The seq of
// what it carries is the record's offset, so Comment.Seq is zero inside.
type LogRecord struct {
	Kind       string       `json:"k"`
	StreamID   snowflake.ID `json:"s"`
	Comment    *Comment     `json:"c,omitempty"`
	Retract    *Retraction  `json:"r,omitempty"`
	State      *StateChange `json:"st,omitempty"`
	AcceptedAt int64        `json:"at,omitempty"`
	// Features of a comment's author, for scoring on a sampled stream.
	Features *Features `json:"f,omitempty"`
	// Trace is the traceparent of the API's span of a sampled post
	// (Event.Trace).
	Trace string `json:"tp,omitempty"`
	// Scored is the mark of a KindScored record.
	Scored *ScoredMark `json:"sc,omitempty"`
}

// KindScored is the kind of a comments-topic record that is no stream
// event (it has no stream): the moderation consumer's mark, appended to a
// partition after the retractions of a batch it scored, that every
// comment of the partition up to Scored.Through was scored. A router
// that reads it has read those retractions, so it may release what it
// holds for the classifier up to that offset without waiting out the
// rest of its hold.
const KindScored = "scored"

// ScoredMark is a KindScored record's content.
type ScoredMark struct {
	// Through is the offset of the last comment scored.
	Through int64 `json:"through"`
}

// Record encodes r for topic, keyed by stream; a retraction is keyed by
// the comment it takes down. The key never places a record: every
// record of a stream is appended to the stream's pinned partition
// (eventlog.Pinned), so a retraction always follows its comment.
func (r LogRecord) Record(topic string) (eventlog.Record, error) {
	v, err := json.Marshal(r)
	if err != nil {
		return eventlog.Record{}, fmt.Errorf("live: encode %s record: %w", r.Kind, err)
	}
	key := StreamKey(r.StreamID)
	if r.Retract != nil {
		key = []byte(r.Retract.CommentID.String())
	}
	return eventlog.Record{Topic: topic, Key: key, Value: v}, nil
}

// Event returns the stream event r is at offset.
func (r LogRecord) Event(offset int64) Event {
	ev := Event{Kind: r.Kind, Seq: offset, Retract: r.Retract, State: r.State, AcceptedAt: r.AcceptedAt, Trace: r.Trace}
	if r.Comment != nil {
		c := *r.Comment
		c.Seq = offset
		ev.Comment = &c
	}
	return ev
}

// StreamKey is the record key of a stream's records.
func StreamKey(id snowflake.ID) []byte { return []byte(id.String()) }

// DecodeLogRecord decodes and validates a comments topic value.
func DecodeLogRecord(b []byte) (LogRecord, error) {
	var r LogRecord
	if len(b) > maxRecord {
		return r, fmt.Errorf("%w: log record of %d bytes", ErrInvalid, len(b))
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return LogRecord{}, fmt.Errorf("%w: log record: %v", ErrInvalid, err)
	}
	if r.Kind == KindScored {
		if r.Scored == nil || r.Scored.Through < 0 || r.StreamID != 0 || r.Comment != nil || r.Retract != nil || r.State != nil {
			return LogRecord{}, fmt.Errorf("%w: scored mark shape", ErrInvalid)
		}
		return r, nil
	}
	if r.Scored != nil {
		return LogRecord{}, fmt.Errorf("%w: %s record with a scored mark", ErrInvalid, r.Kind)
	}
	if r.StreamID == 0 {
		return LogRecord{}, fmt.Errorf("%w: log record without stream", ErrInvalid)
	}
	if err := validateEvent(r.Kind, r.StreamID, r.Comment, r.Retract, r.State); err != nil {
		return LogRecord{}, err
	}
	return r, nil
}

func validateEvent(kind string, stream snowflake.ID, c *Comment, rt *Retraction, st *StateChange) error {
	switch kind {
	case KindComment:
		if c == nil || rt != nil || st != nil {
			return fmt.Errorf("%w: comment event shape", ErrInvalid)
		}
		if c.ID == 0 || c.StreamID != stream || c.Author.ID == 0 || !utf8.ValidString(c.Text) {
			return fmt.Errorf("%w: comment event fields", ErrInvalid)
		}
	case KindRetract:
		if rt == nil || c != nil || st != nil || rt.CommentID == 0 || rt.Seq < 0 {
			return fmt.Errorf("%w: retract event", ErrInvalid)
		}
	case KindState:
		if st == nil || c != nil || rt != nil || (st.State != StateLive && st.State != StateEnded) {
			return fmt.Errorf("%w: state event", ErrInvalid)
		}
	default:
		return fmt.Errorf("%w: event kind %q", ErrInvalid, kind)
	}
	return nil
}

// EncodeEvent encodes an event (recent cache members).
func EncodeEvent(ev Event) ([]byte, error) {
	b, err := json.Marshal(ev)
	if err != nil {
		return nil, fmt.Errorf("live: encode event %d: %w", ev.Seq, err)
	}
	return b, nil
}

// DecodeEvent decodes and validates an event of stream.
func DecodeEvent(stream snowflake.ID, b []byte) (Event, error) {
	var ev Event
	if len(b) > maxRecord {
		return ev, fmt.Errorf("%w: event of %d bytes", ErrInvalid, len(b))
	}
	if err := json.Unmarshal(b, &ev); err != nil {
		return Event{}, fmt.Errorf("%w: event: %v", ErrInvalid, err)
	}
	if err := checkEvent(stream, ev); err != nil {
		return Event{}, err
	}
	return ev, nil
}

func checkEvent(stream snowflake.ID, ev Event) error {
	if ev.Seq < 0 {
		return fmt.Errorf("%w: event seq %d", ErrInvalid, ev.Seq)
	}
	if err := validateEvent(ev.Kind, stream, ev.Comment, ev.Retract, ev.State); err != nil {
		return err
	}
	if ev.Comment != nil && ev.Comment.Seq != ev.Seq {
		return fmt.Errorf("%w: comment seq %d in event %d", ErrInvalid, ev.Comment.Seq, ev.Seq)
	}
	switch ev.Tier {
	case "", TierPinned, TierSample, TierRest:
	default:
		return fmt.Errorf("%w: event tier %q", ErrInvalid, ev.Tier)
	}
	return nil
}

// EncodeBatch encodes a relay batch.
func EncodeBatch(b Batch) ([]byte, error) {
	v, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("live: encode batch of %d: %w", b.StreamID, err)
	}
	return v, nil
}

// DecodeBatch decodes and validates a relay batch: events of its stream in
// strictly increasing seq order, above Prev.
func DecodeBatch(v []byte) (Batch, error) {
	var b Batch
	if len(v) > maxBatch {
		return b, fmt.Errorf("%w: batch of %d bytes", ErrInvalid, len(v))
	}
	if err := json.Unmarshal(v, &b); err != nil {
		return Batch{}, fmt.Errorf("%w: batch: %v", ErrInvalid, err)
	}
	if b.StreamID == 0 || b.Prev < -1 {
		return Batch{}, fmt.Errorf("%w: batch header", ErrInvalid)
	}
	last := b.Prev
	for _, ev := range b.Events {
		if err := checkEvent(b.StreamID, ev); err != nil {
			return Batch{}, err
		}
		if ev.Seq <= last {
			return Batch{}, fmt.Errorf("%w: batch seq %d after %d", ErrInvalid, ev.Seq, last)
		}
		last = ev.Seq
	}
	if b.Reactions != nil {
		if err := checkCounts(b.Reactions.Counts); err != nil {
			return Batch{}, err
		}
	}
	if len(b.Events) == 0 && b.Reactions == nil {
		return Batch{}, fmt.Errorf("%w: empty batch", ErrInvalid)
	}
	return b, nil
}

func checkCounts(counts map[string]int64) error {
	for k, n := range counts {
		if !ReactionKinds[k] || n < 0 {
			return fmt.Errorf("%w: reaction %q: %d", ErrInvalid, k, n)
		}
	}
	return nil
}

// ReactionRecord is the value of a record on the reactions topic: one
// viewer's batch of taps, in the second the API accepted it.
type ReactionRecord struct {
	StreamID snowflake.ID     `json:"s"`
	Second   int64            `json:"sec"`
	Counts   map[string]int64 `json:"counts"`
	// P is the report probability the client applied (0: 1).
	P float64 `json:"p,omitempty"`
}

// ReactionKey is the reactions topic key of viewer on stream: (stream,
// viewer mod ReactionShards), so one stream's taps spread over 16
// partitions.
func ReactionKey(stream, viewer snowflake.ID) []byte {
	return []byte(stream.String() + "/" + strconv.FormatUint(uint64(viewer)%ReactionShards, 10))
}

// Record encodes r for topic, keyed by (stream, viewer mod 16).
func (r ReactionRecord) Record(topic string, viewer snowflake.ID) (eventlog.Record, error) {
	v, err := json.Marshal(r)
	if err != nil {
		return eventlog.Record{}, fmt.Errorf("live: encode reactions: %w", err)
	}
	return eventlog.Record{Topic: topic, Key: ReactionKey(r.StreamID, viewer), Value: v}, nil
}

// DecodeReactionRecord decodes and validates a reactions topic value.
func DecodeReactionRecord(b []byte) (ReactionRecord, error) {
	var r ReactionRecord
	if len(b) > maxRecord {
		return r, fmt.Errorf("%w: reactions record of %d bytes", ErrInvalid, len(b))
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return ReactionRecord{}, fmt.Errorf("%w: reactions record: %v", ErrInvalid, err)
	}
	if r.StreamID == 0 || r.Second <= 0 || r.P < 0 || r.P > 1 || (r.P > 0 && r.P < MinReportP) {
		return ReactionRecord{}, fmt.Errorf("%w: reactions record header", ErrInvalid)
	}
	if err := checkCounts(r.Counts); err != nil {
		return ReactionRecord{}, err
	}
	return r, nil
}
