package live

import (
	"context"
	"errors"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/counters"
	"github.com/concord-chat/concord/runtime/adapters/eventlog"
	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Errors of the ports. Adapters wrap them (errors.Is works).
var (
	// ErrNotFound means the stream or comment does not exist.
	ErrNotFound = errors.New("live: not found")
	// ErrUnavailable means a backend could not be reached; the call may be
	// retried.
	ErrUnavailable = errors.New("live: unavailable")
	// ErrInvalid reports bytes or arguments that do not decode or validate.
	ErrInvalid = errors.New("live: invalid")
	// ErrClosed is returned by calls on a closed adapter.
	ErrClosed = errors.New("live: closed")
)

// Page asks the store for one page of a stream's comments.
type Page struct {
	// Before, when > 0, returns comments with seq < Before, newest first.
	Before int64
	// AfterVideoTS, when >= 0 and Replay is set, returns comments with
	// video_ts_ms > AfterVideoTS, ascending by (video_ts_ms, seq).
	AfterVideoTS int64
	Replay       bool
	// Limit is 1..100.
	Limit int
	// Viewer sees their own shadow-accepted comments; nobody else does.
	Viewer snowflake.ID
}

// Store is the comments store: stream records and every comment, laid out
// as ((stream_id, 10-minute bucket, shard), seq) with a replay index by
// video timestamp. Retracted comments are soft-deleted and never listed.
type Store interface {
	// PutStream creates or replaces a stream record.
	PutStream(ctx context.Context, s Stream) error
	// GetStream returns the stream or ErrNotFound.
	GetStream(ctx context.Context, id snowflake.ID) (Stream, error)
	// PutComments stores comments (of any streams), idempotently by
	// (stream, seq). shards is 1, or SampledShards for a sampled stream.
	PutComments(ctx context.Context, shards int, cs []Comment) error
	// Retract soft-deletes a comment with reason; a missing comment is
	// ErrNotFound.
	Retract(ctx context.Context, streamID, commentID snowflake.ID, reason string) error
	// GetComment returns a comment, retracted or not, or ErrNotFound.
	GetComment(ctx context.Context, streamID, commentID snowflake.ID) (Comment, error)
	// List returns one page of a stream's comments (see Page).
	List(ctx context.Context, streamID snowflake.ID, p Page) ([]Comment, error)
	// Close releases the store.
	Close() error
}

// Recent is the recent-comments cache: the last RecentSize events of each
// stream scored by seq.
type Recent interface {
	// Add stores events (all of stream) idempotently by seq and trims the
	// stream to its newest RecentSize events.
	Add(ctx context.Context, stream snowflake.ID, events []Event) error
	// Drop removes the event at seq, if held.
	Drop(ctx context.Context, stream snowflake.ID, seq int64) error
	// Range returns the newest n events with after < seq < before
	// (before <= 0: no upper bound), ascending by seq.
	Range(ctx context.Context, stream snowflake.ID, after, before int64, n int) ([]Event, error)
	// Expire makes the stream's events disappear ttl from now.
	Expire(ctx context.Context, stream snowflake.ID, ttl time.Duration) error
}

// Nonces remembers idempotency keys (comment nonces).
type Nonces interface {
	// Claim reserves key for ttl. claimed is true when this call took it;
	// otherwise value is what Set stored, nil while the claimer has not
	// set it yet.
	Claim(ctx context.Context, key string, ttl time.Duration) (value []byte, claimed bool, err error)
	// Set stores value under a claimed key for ttl.
	Set(ctx context.Context, key string, value []byte, ttl time.Duration) error
	// Release forgets key (the claimer failed).
	Release(ctx context.Context, key string) error
}

// Relay carries batches from the router to the gateways subscribed to a
// stream: fire and forget, each message delivered once per subscriber,
// never once per viewer.
type Relay interface {
	// Publish sends msg to the subscribers of stream's topic.
	Publish(ctx context.Context, stream snowflake.ID, msg []byte) error
	// Subscribe calls deliver for every message published to stream's topic
	// after Subscribe returns, in publish order, from one goroutine per
	// Relay. cancel unsubscribes: once it returns, deliver is not called
	// again for this subscription.
	Subscribe(ctx context.Context, stream snowflake.ID, deliver func([]byte)) (cancel func(), err error)
}

// CountingRelay is a Relay that also tells how many subscribers a
// message was copied to: the backbone copies of a batch (one per
// subscribed gateway process). Both relay adapters implement it.
type CountingRelay interface {
	PublishCount(ctx context.Context, stream snowflake.ID, msg []byte) (copies int, err error)
}

// Friends is the platform's relationships as the live gateway needs them
// (presence.Relationships has this shape): a viewer's friends, read once
// when the viewer joins a stream, so a sampled stream's rest-tier
// comments by those friends reach that viewer too.
type Friends interface {
	Friends(ctx context.Context, user snowflake.ID) ([]snowflake.ID, error)
}

// Classifier scores comment texts for takedown: one score in [0, 1] per
// text, in order (higher: more likely to be removed). The ML moderation
// consumer calls it in batches; runtime/domain/live/classifier has a CPU model in
// Go and a client of a KServe v2 / Triton inference server.
type Classifier interface {
	Score(ctx context.Context, texts []string) ([]float64, error)
}

// Board is the part of the registry the live path uses: a small watched
// key-value space that pushes rules and bans to every API instance and
// carries gateways' viewer counts. registry/etcd implements it, as does
// the in-process board (runtime/domain/live/board).
type Board interface {
	Put(ctx context.Context, key string, value []byte, lifetime registry.Lifetime) error
	Get(ctx context.Context, key string) ([]byte, error)
	List(ctx context.Context, prefix string) (map[string][]byte, error)
	Delete(ctx context.Context, key string) error
	WatchKV(ctx context.Context, prefix string) (<-chan registry.KVUpdate, error)
}

// Appender is the producing side of the event log: eventlog.Log plus
// partition pinning (eventlog.Pinned).
type Appender interface {
	Append(ctx context.Context, records ...eventlog.Record) error
	eventlog.Pinned
}

// Consumer is the consuming side of the event log.
type Consumer interface {
	Consume(ctx context.Context, group string, topics []string, h eventlog.Handler) error
}

// Verifier checks a bearer token (runtime/domain/auth.Issuer); an invalid token
// is auth.ErrInvalidToken.
type Verifier interface {
	Verify(ctx context.Context, token string) (snowflake.ID, error)
}

// Users reads accounts (store.Users).
type Users interface {
	GetUser(ctx context.Context, id snowflake.ID) (store.User, error)
}

// IDs mints snowflakes (snowflake.Generator).
type IDs interface {
	Next() (snowflake.ID, error)
}

// Counters are the expiring counters of rate limits and duplicate checks
// (runtime/adapters/counters: mem or Redis).
type Counters interface {
	Incr(ctx context.Context, key string, by int64, ttl time.Duration) (int64, error)
	Take(ctx context.Context, key string, limit int, window time.Duration, now time.Time) (counters.Decision, error)
}

// Topics names the event log topics of the live path.
type Topics struct {
	Comments  string
	Reactions string
}

// TopicsFor returns the topics under prefix ("<prefix>comments",
// "<prefix>reactions").
func TopicsFor(prefix string) Topics {
	return Topics{Comments: prefix + "comments", Reactions: prefix + "reactions"}
}
