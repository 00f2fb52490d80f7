// Package history records what the clients of a fault test did — every
// operation with its invocation, its completion and its result — and
// checks the record afterwards, in the manner of Jepsen: a per-channel
// linearizability check with porcupine (github.com/anishathalye/porcupine)
// over message sends and history reads, and direct checks that every
// acknowledged message is in the final history exactly once and in
// snowflake order, that no unacknowledged send landed twice, that no
// session saw a message of a channel it could not view, that mention
// counts agree with the history, that read markers are where the acks
// left them, that every acknowledged live comment is in the archive once
// and that viewers received each comment at most once, in order.
//
// The package knows nothing of how the operations were made: the test
// (test/faults) drives a cluster and fills a Recorder.
package history

import (
	"sync"
	"time"
)

// Kind is what an operation did.
type Kind string

// The kinds of operations the clients make.
const (
	// Send is POST /channels/{id}/messages with a nonce in the content.
	Send Kind = "send"
	// Read is GET /channels/{id}/messages?limit=N: the newest N messages.
	Read Kind = "read"
	// Comment is POST /v1/streams/{id}/comments.
	Comment Kind = "comment"
	// Ack is POST /channels/{id}/messages/{message}/ack by User: it
	// moves User's read marker in the channel to message ID.
	Ack Kind = "ack"
)

// Msg is a message as a read returned it.
type Msg struct {
	// ID is its snowflake.
	ID string
	// Nonce is the marker the sending client put in its content.
	Nonce string
	// Mentions are the user ids it mentions.
	Mentions []string
}

// Op is one operation of one client.
type Op struct {
	// Client numbers the client that made it.
	Client int
	// Kind is what it did.
	Kind Kind
	// Channel is the channel (or, for comments, the stream) it addressed.
	Channel string
	// Nonce is a send's or comment's marker, unique in the run.
	Nonce string
	// Call and Return are when it was invoked and when it completed.
	Call, Return time.Time
	// OK is true for an acknowledged send or comment (2xx with an id)
	// and a read that answered 200.
	OK bool
	// Definite is true for a send or comment the server refused before
	// acting (a 4xx): it must not land. A failure that is not definite (a
	// 5xx, a timeout, a cut connection) may land or not, never twice.
	Definite bool
	// Err is why it failed.
	Err string
	// ID is an acknowledged send's or comment's id, and the message an
	// ack moves the marker to (acknowledged or not).
	ID string
	// User is who acked (Ack).
	User string
	// Limit is a read's limit.
	Limit int
	// Msgs is what a read returned, oldest first.
	Msgs []Msg
}

// Delivery is one message a gateway session received.
type Delivery struct {
	// User is the session's user id.
	User string
	// Session is the session id (READY's session_id).
	Session string
	// Channel and Message are the MESSAGE_CREATE's channel_id and id.
	Channel, Message string
}

// Receipt is a live comment a viewer received over SSE.
type Receipt struct {
	// Viewer names the viewer: one per SSE client, across its
	// reconnections (each resumes with Last-Event-ID).
	Viewer string
	// Stream and Comment are the stream and the comment's id; Seq is
	// the event's id (the comment's sequence on its stream).
	Stream, Comment string
	Seq             int64
}

// Recorder collects operations from many goroutines.
type Recorder struct {
	mu         sync.Mutex
	ops        []Op
	deliveries []Delivery
	receipts   []Receipt
}

// Receive records a live comment a viewer received.
func (r *Recorder) Receive(rc Receipt) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.receipts = append(r.receipts, rc)
}

// Receipts are the live comments received so far, in order.
func (r *Recorder) Receipts() []Receipt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Receipt(nil), r.receipts...)
}

// Begin records the invocation of op (its Call set now) and returns its
// index for End.
func (r *Recorder) Begin(op Op) int {
	op.Call = time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ops = append(r.ops, op)
	return len(r.ops) - 1
}

// End records the completion of operation i: fill sets its result.
func (r *Recorder) End(i int, fill func(op *Op)) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	fill(&r.ops[i])
	r.ops[i].Return = now
}

// Deliver records a message a session received.
func (r *Recorder) Deliver(d Delivery) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deliveries = append(r.deliveries, d)
}

// Ops is a copy of the operations so far.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Op(nil), r.ops...)
}

// Deliveries is a copy of the deliveries so far.
func (r *Recorder) Deliveries() []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Delivery(nil), r.deliveries...)
}
