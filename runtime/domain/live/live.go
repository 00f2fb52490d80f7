// Package live holds the domain of Concord's live comments: the stream and
// comment records, the events that travel from the Comment API through the
// event log, the stream router and the relay to the SSE gateways, their
// byte encodings, and the ports every role of the path consumes.
//
// The path, as built:
//
//	POST /v1/streams/{id}/comments
//	  -> api (auth, sync filter) -> event log <prefix>comments, the
//	     stream's pinned partition; the produce offset is the comment's seq
//	  -> router (consumer group: one owner per partition) -> recent cache
//	     (last 500 per stream) -> relay, one Batch per stream per <=100 ms
//	  -> gateway (subscribed at the first local viewer; ring of 500) -> SSE
//	  -> archiver (its own consumer group) -> comments store
//
// Sequence numbers are partition offsets, so they increase strictly per
// stream but are not dense: a partition carries many streams. Every Batch
// therefore names the seq of the stream's previous event (Prev), which is
// how a gateway tells a lost batch from a quiet stream.
package live

import (
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Stream states.
const (
	StateLive  = "live"
	StateEnded = "ended"
)

// Limits of the contract.
const (
	// MaxCommentRunes is the longest comment text, in characters.
	MaxCommentRunes = 200
	// SnapshotSize is how many broadcast comments a viewer gets on open.
	SnapshotSize = 50
	// ResumeWindow is how many broadcast events a Last-Event-ID resume may
	// span before the gateway answers with a gap and a fresh snapshot.
	ResumeWindow = 200
	// RecentSize is how many events the recent cache and each gateway's
	// ring keep per stream.
	RecentSize = 500
	// BucketWidth is the time width of a comments store partition.
	BucketWidth = 10 * time.Minute
	// SampledShards is the number of store shards of a sampled stream.
	SampledShards = 16
	// ReactionShards spreads one stream's reactions over this many keys.
	ReactionShards = 16
)

// Stream is a live stream as stored. The JSON of the contract is
// StreamView.
type Stream struct {
	ID        snowflake.ID `json:"id"`
	CreatorID snowflake.ID `json:"creator_id"`
	Title     string       `json:"title"`
	State     string       `json:"state"`
	StartedAt time.Time    `json:"started_at"`
	EndedAt   *time.Time   `json:"ended_at"`
	Sampled   bool         `json:"sampled"`
	// Partition is the comments partition the stream is pinned to for its
	// whole life, chosen at creation.
	Partition int32 `json:"partition"`
	// SlowModeSeconds, when > 0, replaces the default per-user interval.
	SlowModeSeconds int `json:"slow_mode_seconds,omitempty"`
	// BlockedTerms are the stream's own blocked terms.
	BlockedTerms []string `json:"blocked_terms,omitempty"`
	// Moderators may delete comments and ban on this stream.
	Moderators []snowflake.ID `json:"moderators,omitempty"`
	// StreamURL is where viewers play the stream's video (an http or https
	// URL the creator sets; the video pipeline is not Concord's). Empty:
	// none.
	StreamURL string `json:"stream_url,omitempty"`
	// Version counts the record's saves. The board's watch may hand an
	// API instance an older copy after its own newer write; the higher
	// version wins, so a creator reads back what they just changed.
	Version int64 `json:"version,omitempty"`
}

// IsModerator reports whether user may moderate s: its creator or one of
// its moderators.
func (s *Stream) IsModerator(user snowflake.ID) bool {
	if user == 0 {
		return false
	}
	if user == s.CreatorID {
		return true
	}
	for _, m := range s.Moderators {
		if m == user {
			return true
		}
	}
	return false
}

// StreamView is the Stream object of the HTTP contract.
type StreamView struct {
	ID        snowflake.ID `json:"id"`
	CreatorID snowflake.ID `json:"creator_id"`
	Title     string       `json:"title"`
	State     string       `json:"state"`
	StartedAt time.Time    `json:"started_at"`
	EndedAt   *time.Time   `json:"ended_at"`
	Viewers   int64        `json:"viewers"`
	Sampled   bool         `json:"sampled"`
	// StreamURL is present only when the creator set one.
	StreamURL string `json:"stream_url,omitempty"`
}

// View returns the contract's object for s with viewers.
func (s *Stream) View(viewers int64) StreamView {
	return StreamView{ID: s.ID, CreatorID: s.CreatorID, Title: s.Title, State: s.State,
		StartedAt: s.StartedAt, EndedAt: s.EndedAt, Viewers: viewers, Sampled: s.Sampled, StreamURL: s.StreamURL}
}

// Author is a comment's author as the contract shows it.
type Author struct {
	ID       snowflake.ID `json:"id"`
	Username string       `json:"username"`
}

// Comment is one live comment as it travels between the roles (log,
// recent cache, relay, store). Viewers and clients get CommentView.
type Comment struct {
	ID        snowflake.ID `json:"id"`
	StreamID  snowflake.ID `json:"stream_id"`
	Seq       int64        `json:"seq"`
	Author    Author       `json:"author"`
	Text      string       `json:"text"`
	VideoTSMs int64        `json:"video_ts_ms"`
	CreatedAt time.Time    `json:"created_at"`

	// Shadow marks a shadow-accepted comment: only its author is shown it.
	Shadow bool `json:"shadow,omitempty"`
	// Retracted and Reason are the soft delete of the store.
	Retracted bool   `json:"retracted,omitempty"`
	Reason    string `json:"reason,omitempty"`
}

// CommentView is the Comment object of the HTTP contract.
type CommentView struct {
	ID        snowflake.ID `json:"id"`
	StreamID  snowflake.ID `json:"stream_id"`
	Seq       int64        `json:"seq"`
	Author    Author       `json:"author"`
	Text      string       `json:"text"`
	VideoTSMs int64        `json:"video_ts_ms"`
	CreatedAt time.Time    `json:"created_at"`
}

// View returns the contract's object for c.
func (c *Comment) View() CommentView {
	return CommentView{ID: c.ID, StreamID: c.StreamID, Seq: c.Seq, Author: c.Author, Text: c.Text,
		VideoTSMs: c.VideoTSMs, CreatedAt: c.CreatedAt}
}

// Retraction takes a comment down. Its own seq is the offset of the
// retraction record, on the comment's partition, so it never overtakes the
// comment.
type Retraction struct {
	CommentID snowflake.ID `json:"comment_id"`
	// Seq is the retracted comment's seq.
	Seq    int64  `json:"seq"`
	Reason string `json:"reason"`
	// AuthorID, Shadow and VideoTSMs are copied from the comment so
	// gateways can tell which viewers were sent it without holding it and
	// the archiver can find its replay row. Viewers get RetractView.
	AuthorID  snowflake.ID `json:"author_id,omitempty"`
	Shadow    bool         `json:"shadow,omitempty"`
	VideoTSMs int64        `json:"video_ts_ms,omitempty"`
	// Request is set on a takedown appended before its comment reached
	// anything the API could read (it was accepted moments ago on
	// another API instance and is only in the log): Seq, AuthorID,
	// Shadow and VideoTSMs are then unknown, and the router and the
	// archiver resolve it against the comment, which is before it on the
	// same partition, in log order (Resolve). Gateways only ever get
	// resolved retractions.
	Request *TakedownRequest `json:"rq,omitempty"`
}

// TakedownWindow is how young (by its id) a comment the API cannot read
// yet must be for a takedown of it to be appended unresolved rather than
// answered 404 (Unknown comment): longer than the archiver and the
// router normally lag. The router remembers comments longer than this.
const TakedownWindow = 10 * time.Second

// TakedownRequest is who asked for an unresolved takedown and so whether
// it applies once its comment is known.
type TakedownRequest struct {
	// By is the user who asked (0: the platform, e.g. a report threshold).
	By snowflake.ID `json:"by,omitempty"`
	// Any: the takedown applies whoever wrote the comment (a moderator
	// of the stream, reports); otherwise only when By wrote it.
	Any bool `json:"any,omitempty"`
}

// Resolve fills an unresolved takedown from the comment it names, as the
// consumers of the log do when they reach it: it reports false when the
// takedown does not apply (the comment is of another stream, or neither
// By wrote it nor Any is set). An empty reason becomes the contract's
// "deleted by author" or "removed by moderator". The result is resolved
// (Request cleared).
func (r Retraction) Resolve(c Comment) (Retraction, bool) {
	rq := r.Request
	if rq == nil {
		return r, true
	}
	if c.ID != r.CommentID || (!rq.Any && rq.By != c.Author.ID) {
		return r, false
	}
	if r.Reason == "" {
		r.Reason = "removed by moderator"
		if rq.By == c.Author.ID {
			r.Reason = "deleted by author"
		}
	}
	r.Seq, r.AuthorID, r.Shadow, r.VideoTSMs, r.Request = c.Seq, c.Author.ID, c.Shadow, c.VideoTSMs, nil
	return r, true
}

// RetractView is the data of the contract's retract event.
type RetractView struct {
	CommentID snowflake.ID `json:"comment_id"`
	Seq       int64        `json:"seq"`
	Reason    string       `json:"reason"`
}

// StateChange is the state event of the contract.
type StateChange struct {
	State   string `json:"state"`
	Sampled bool   `json:"sampled"`
	// ReportP is the probability with which a client sends each of its
	// reaction batches (and states as "p" in it): below 1 when the
	// stream's reaction requests pass the budget. Absent until the
	// stream's first change; then always present (1 again when it is
	// back under budget).
	ReportP float64 `json:"report_p,omitempty"`
}

// Reactions is one second of a stream's reaction counts.
type Reactions struct {
	Second int64            `json:"second"`
	Counts map[string]int64 `json:"counts"`
	// P, on a router's partial, is the report probability that router's
	// shard of the stream asks for (0: 1); gateways tell viewers the
	// lowest. Not part of the viewers' event.
	P float64 `json:"p,omitempty"`
}

// Reaction reporting: a stream's reaction requests are thinned once they
// pass ReactionBudget a second. Clients send each batch with probability
// p (a power of two, at least MinReportP) and the aggregator scales what
// arrives by 1/p, so the counts drawn stay the same.
const (
	ReactionBudget = 2000
	MinReportP     = 1.0 / 1024
)

// ReactionKinds are the reactions a viewer may send.
var ReactionKinds = map[string]bool{
	"heart": true, "like": true, "laugh": true, "wow": true, "sad": true, "clap": true, "fire": true,
}

// MaxReactionCount bounds one kind's count in one batch.
const MaxReactionCount = 1000

// Event kinds of Event.Kind.
const (
	KindComment = "comment"
	KindRetract = "retract"
	KindState   = "state"
)

// Tiers of a comment on a sampled stream (Event.Tier). On a stream that
// is not sampled every comment is broadcast and has no tier.
const (
	// TierPinned: the creator's and moderators' comments, shown to every
	// viewer (at most PinnedRate a second; beyond it they compete for the
	// sample).
	TierPinned = "pinned"
	// TierSample: the best scored of the rest, about SampleRate a second
	// and at most one per author per SampleAuthorGap, shown to every
	// viewer.
	TierSample = "sample"
	// TierRest: everything else, shown only to its author (and the
	// author's friends, where the gateway knows them).
	TierRest = "rest"
)

// Sampled mode: a stream enters it after SampledEnterFor above
// SampledEnterRate comments a second and leaves it after SampledLeaveFor
// below SampledLeaveRate; in it each viewer is shown about SampleRate +
// PinnedRate comments a second whatever the posting rate.
const (
	SampledEnterRate = 50
	SampledEnterFor  = 10 * time.Second
	SampledLeaveRate = 30
	SampledLeaveFor  = 30 * time.Second
	SampleRate       = 10
	PinnedRate       = 2
	SampleAuthorGap  = time.Minute
)

// Features are the cheap facts the API knows about a comment's author
// when it accepts the comment, carried on the log record for the
// router's scoring of a sampled stream.
type Features struct {
	// Moderator: the stream's creator or one of its moderators.
	Moderator bool `json:"m,omitempty"`
	// AccountAgeS is the author's account age in seconds at the accept.
	AccountAgeS int64 `json:"age,omitempty"`
	// Bot: the account is a bot.
	Bot bool `json:"bot,omitempty"`
}

// SampledKey is the board key the router that owns a stream's partition
// holds (lease-bound) while the stream is sampled; GET /v1/streams/{id}
// and gateways subscribing read it.
func SampledKey(stream snowflake.ID) string { return SampledPrefix + stream.String() }

// SampledPrefix is the board prefix of the routers' sampled marks
// (SampledKey): one List of it names every sampled stream.
const SampledPrefix = "live/sampled/"

// Event is one entry of a stream's sequence: a comment, a retraction or a
// state change, with its seq (the log offset). Exactly one of Comment,
// Retract and State is set, as Kind says.
type Event struct {
	Kind    string       `json:"k"`
	Seq     int64        `json:"q"`
	Comment *Comment     `json:"c,omitempty"`
	Retract *Retraction  `json:"r,omitempty"`
	State   *StateChange `json:"st,omitempty"`
	// AcceptedAt is when the API accepted the record (Unix ns), for the
	// post-to-flush latency.
	AcceptedAt int64 `json:"at,omitempty"`
	// Tier is a comment's tier on a sampled stream (empty: broadcast);
	// on a retraction, the tier of the comment it takes down.
	Tier string `json:"t,omitempty"`
	// Trace is the W3C traceparent of the span that last handled a
	// sampled comment (the API's, then the router's), so the trace of one
	// post crosses the event log and the relay; empty when not sampled.
	Trace string `json:"tp,omitempty"`
}

// Batch is what the router publishes to a stream's relay topic: the
// stream's events since the previous batch, in seq order, and/or a partial
// count of one second of reactions.
type Batch struct {
	StreamID snowflake.ID `json:"s"`
	// Prev is the seq of the stream's event just before Events[0], -1 when
	// there is none or the router does not know it; a gateway whose last
	// seq is below Prev missed a batch and refills from the recent cache.
	Prev      int64      `json:"p"`
	Events    []Event    `json:"e,omitempty"`
	Reactions *Reactions `json:"rx,omitempty"`
	// Sampled is the stream's mode when the router published the batch
	// (batches with events only); a gateway tells its viewers when it
	// changes.
	Sampled bool `json:"sm,omitempty"`
}

// Bucket returns the store bucket of t.
func Bucket(t time.Time) int64 { return t.UnixMilli() / BucketWidth.Milliseconds() }

// VideoBucket returns the replay bucket of a video timestamp.
func VideoBucket(videoTSMs int64) int64 { return videoTSMs / BucketWidth.Milliseconds() }

// ViewerReport is one gateway's viewer count of one stream, written to
// the board under ViewersKey every few seconds.
type ViewerReport struct {
	Count int64 `json:"n"`
	// At is when the count was taken (Unix ms); readers ignore reports
	// older than ViewerTTL, so a dead gateway's viewers drop out.
	At int64 `json:"at"`
}

// ViewerTTL is how long a viewer report counts.
const ViewerTTL = 15 * time.Second

// ViewersPrefix is the board prefix of a stream's viewer reports.
func ViewersPrefix(stream snowflake.ID) string { return "live/viewers/" + stream.String() + "/" }

// ViewersKey is the board key of gateway's report for stream.
func ViewersKey(stream snowflake.ID, gateway string) string { return ViewersPrefix(stream) + gateway }
