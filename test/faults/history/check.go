package history

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Input is everything the checker judges.
type Input struct {
	// Ops are the clients' operations.
	Ops []Op
	// Final is every channel's whole history read after the faults
	// healed, oldest first, by channel.
	Final map[string][]Msg
	// Deliveries are the messages the gateway sessions received.
	Deliveries []Delivery
	// Hidden lists, by user id, the channels that user cannot view.
	Hidden map[string][]string
	// Mentions are mention counts read back from read states: for each
	// user and channel (that user never marked read), what the server
	// reports. Its key is MentionKey(user, channel).
	Mentions map[string]int
	// Archive is every live stream's comments read back from the
	// archive after the faults, by stream: comment ids.
	Archive map[string][]string
	// Markers are read markers read back after the faults (READY's
	// read_state last_message_id; "" when it has none), keyed by
	// MentionKey(user, channel): each must be where the acks left it.
	Markers map[string]string
	// Receipts are the live comments viewers received over SSE, each
	// viewer's in the order received.
	Receipts []Receipt
	// Timeout bounds porcupine's search per check (zero: a minute).
	Timeout time.Duration
}

// MentionKey keys Input.Mentions.
func MentionKey(user, channel string) string { return user + "/" + channel }

// Result is the checker's verdict.
type Result struct {
	// Violations are the properties that failed, one line each; none
	// means the history passed.
	Violations []string
	// Linearizable is porcupine's verdict per channel: Ok, Illegal or
	// Unknown (its search timed out).
	Linearizable map[string]porcupine.CheckResult
	// Counts summarize the history.
	Sends, Acked, Failed, Landed, Reads, Comments, CommentsAcked int
	// Acks and AcksAcked count read-marker acks.
	Acks, AcksAcked int
	// Received is how many comments viewers received over SSE, and
	// ReceivedAcked how many acknowledged comments reached every viewer.
	Received, ReceivedAcked int
	// Errors counts failed operations by kind and the start of their error.
	Errors map[string]int
	// Stale are reads that missed a message acknowledged before they
	// began (not pushed out of their window by newer ones), or that lost
	// one an earlier read had shown: porcupine's Illegal, explained. At
	// most ten are listed.
	Stale []string
}

// OK is true when nothing was violated and every channel was found
// linearizable.
func (r Result) OK() bool {
	if len(r.Violations) > 0 {
		return false
	}
	for _, v := range r.Linearizable {
		if v != porcupine.Ok {
			return false
		}
	}
	return true
}

// String is a summary: counts, porcupine's verdicts and the violations.
func (r Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sends %d (acknowledged %d, failed %d of which %d landed), reads %d, comments %d (acknowledged %d; %d received over SSE, %d acknowledged ones by every viewer), acks %d (acknowledged %d)\n",
		r.Sends, r.Acked, r.Failed, r.Landed, r.Reads, r.Comments, r.CommentsAcked, r.Received, r.ReceivedAcked, r.Acks, r.AcksAcked)
	chans := make([]string, 0, len(r.Linearizable))
	for c := range r.Linearizable {
		chans = append(chans, c)
	}
	sort.Strings(chans)
	for _, c := range chans {
		fmt.Fprintf(&b, "channel %s: linearizable %s\n", c, r.Linearizable[c])
		if r.Linearizable[c] == porcupine.Unknown {
			fmt.Fprintf(&b, "UNDECIDED: channel %s: porcupine's search ran out of time (Input.Timeout) before it found a linearization or proved there is none; that is not a pass\n", c)
		}
	}
	errs := make([]string, 0, len(r.Errors))
	for e := range r.Errors {
		errs = append(errs, e)
	}
	sort.Strings(errs)
	for _, e := range errs {
		fmt.Fprintf(&b, "failed %d: %s\n", r.Errors[e], e)
	}
	for _, s := range r.Stale {
		fmt.Fprintf(&b, "STALE READ: %s\n", s)
	}
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "VIOLATION: %s\n", v)
	}
	return b.String()
}

// Check judges in.
func Check(in Input) Result {
	res := Result{Linearizable: map[string]porcupine.CheckResult{}, Errors: map[string]int{}}
	for _, op := range in.Ops {
		if !op.OK {
			e := op.Err
			if len(e) > 60 {
				e = e[:60]
			}
			res.Errors[string(op.Kind)+": "+e]++
		}
	}
	bad := func(format string, args ...any) {
		res.Violations = append(res.Violations, fmt.Sprintf(format, args...))
	}
	// Where each nonce ended up, and the final order.
	landed := map[string][]place{}
	for ch, msgs := range in.Final {
		var prev uint64
		for i, m := range msgs {
			id, err := strconv.ParseUint(m.ID, 10, 64)
			if err != nil {
				bad("channel %s: message id %q is not a snowflake", ch, m.ID)
				continue
			}
			if i > 0 && id <= prev {
				bad("channel %s: history not in snowflake order: %s after %d", ch, m.ID, prev)
			}
			prev = id
			if m.Nonce != "" {
				landed[m.Nonce] = append(landed[m.Nonce], place{ch, m.ID})
			}
		}
	}
	seenInRead := map[string]bool{}
	for _, op := range in.Ops {
		if op.Kind == Read && op.OK {
			for _, m := range op.Msgs {
				seenInRead[m.Nonce] = true
			}
		}
	}
	// Direct checks of sends.
	type acked struct {
		id            uint64
		call, return_ time.Time
		nonce         string
	}
	byChannel := map[string][]acked{}
	for _, op := range in.Ops {
		switch op.Kind {
		case Read:
			if op.OK {
				res.Reads++
			}
			continue
		case Comment, Ack:
			continue
		}
		res.Sends++
		places := landed[op.Nonce]
		if len(places) > 1 {
			bad("send %s (%s): in the history %d times: %v", op.Nonce, status(op), len(places), places)
		}
		switch {
		case op.OK:
			res.Acked++
			if len(places) == 0 {
				bad("send %s acknowledged as %s on channel %s at %s: not in the final history (lost)", op.Nonce, op.ID, op.Channel, op.Return.Format(time.RFC3339Nano))
				continue
			}
			if places[0].channel != op.Channel || places[0].id != op.ID {
				bad("send %s acknowledged as %s on %s: in the history as %s on %s", op.Nonce, op.ID, op.Channel, places[0].id, places[0].channel)
			}
			id, _ := strconv.ParseUint(op.ID, 10, 64)
			byChannel[op.Channel] = append(byChannel[op.Channel], acked{id, op.Call, op.Return, op.Nonce})
		default:
			res.Failed++
			if len(places) > 0 {
				res.Landed++
				if op.Definite {
					bad("send %s refused (%s) but in the history as %s", op.Nonce, op.Err, places[0].id)
				}
			}
		}
	}
	// Real-time order: a send acknowledged before another began has the
	// smaller snowflake (clients page with after= and before=).
	for ch, as := range byChannel {
		sort.Slice(as, func(i, j int) bool { return as[i].return_.Before(as[j].return_) })
		byCall := slices.Clone(as)
		sort.Slice(byCall, func(i, j int) bool { return byCall[i].call.Before(byCall[j].call) })
		// For each send, the largest id among sends that returned
		// before it was called must be below its own.
		var maxDone uint64
		var maxNonce string
		k := 0
		for _, b := range byCall {
			for k < len(as) && as[k].return_.Before(b.call) {
				if as[k].id > maxDone {
					maxDone, maxNonce = as[k].id, as[k].nonce
				}
				k++
			}
			if maxDone != 0 && b.id <= maxDone {
				bad("channel %s: send %s (id %d) began after send %s (id %d) was acknowledged, yet sorts before it", ch, b.nonce, b.id, maxNonce, maxDone)
			}
		}
	}
	// Linearizability of each channel's sends and reads (porcupine).
	res.Linearizable = linearizable(in, landed2set(landed), seenInRead)
	res.Stale = staleReads(in.Ops, in.Final)
	// Visibility: no session saw a message of a channel hidden from it.
	hidden := map[string]bool{}
	for user, chans := range in.Hidden {
		for _, c := range chans {
			hidden[user+"/"+c] = true
		}
	}
	for _, d := range in.Deliveries {
		if hidden[d.User+"/"+d.Channel] {
			bad("session %s of user %s received message %s of channel %s it cannot view", d.Session, d.User, d.Message, d.Channel)
		}
	}
	// Mention counts equal what the history implies.
	for key, got := range in.Mentions {
		user, ch, _ := strings.Cut(key, "/")
		want := 0
		for _, m := range in.Final[ch] {
			if slices.Contains(m.Mentions, user) {
				want++
			}
		}
		if got != want {
			bad("user %s, channel %s: mention_count %d, the history has %d messages mentioning it", user, ch, got, want)
		}
	}
	// Live comments: every acknowledged one in the archive exactly once.
	archived := map[string]int{}
	for stream, ids := range in.Archive {
		for _, id := range ids {
			archived[stream+"/"+id]++
		}
	}
	for k, n := range archived {
		if n > 1 {
			bad("comment %s archived %d times", k, n)
		}
	}
	for _, op := range in.Ops {
		if op.Kind != Comment {
			continue
		}
		res.Comments++
		if !op.OK {
			continue
		}
		res.CommentsAcked++
		if archived[op.Channel+"/"+op.ID] != 1 {
			bad("comment %s acknowledged as %s on stream %s: in the archive %d times", op.Nonce, op.ID, op.Channel, archived[op.Channel+"/"+op.ID])
		}
	}
	checkReceipts(in, archived, &res, bad)
	checkMarkers(in, &res, bad)
	return res
}

// checkMarkers judges read markers as registers: the marker read back is
// the message of the last acknowledged ack of its user and channel (acks
// of one client are one after the other), or of an ack that failed
// without being refused — it may have taken effect at any time after it
// was invoked, later acknowledged ones included.
func checkMarkers(in Input, res *Result, bad func(string, ...any)) {
	type state struct {
		last    *Op
		allowed map[string]bool
	}
	acks := map[string]*state{}
	for i := range in.Ops {
		op := &in.Ops[i]
		if op.Kind != Ack {
			continue
		}
		res.Acks++
		k := MentionKey(op.User, op.Channel)
		st := acks[k]
		if st == nil {
			st = &state{allowed: map[string]bool{}}
			acks[k] = st
		}
		switch {
		case op.OK:
			res.AcksAcked++
			if st.last == nil || op.Call.After(st.last.Call) {
				st.last = op
			}
		case !op.Definite:
			st.allowed[op.ID] = true
		}
	}
	for k, got := range in.Markers {
		st := acks[k]
		if st == nil {
			continue
		}
		want := ""
		if st.last != nil {
			want = st.last.ID
		}
		if got != want && !st.allowed[got] {
			user, ch, _ := strings.Cut(k, "/")
			bad("user %s, channel %s: read marker at %q, the last acknowledged ack set %q (and no failed ack asked for it)", user, ch, got, want)
		}
	}
}

// checkReceipts judges what viewers received over SSE: each comment at
// most once per viewer (a resume with Last-Event-ID must not replay what
// the viewer had), in the order of its sequence, and only comments that
// are in the archive (a comment shown to viewers was in the log, and
// what is in the log is stored). A viewer may miss comments while it
// reconnects past the gateway's resume window: counted, not a
// violation.
func checkReceipts(in Input, archived map[string]int, res *Result, bad func(string, ...any)) {
	type key struct{ viewer, stream string }
	seen := map[key]map[string]bool{}
	last := map[key]int64{}
	for _, rc := range in.Receipts {
		res.Received++
		k := key{rc.Viewer, rc.Stream}
		if seen[k] == nil {
			seen[k] = map[string]bool{}
			last[k] = -1
		}
		if seen[k][rc.Comment] {
			bad("viewer %s received comment %s of stream %s twice", rc.Viewer, rc.Comment, rc.Stream)
		}
		seen[k][rc.Comment] = true
		if rc.Seq <= last[k] {
			bad("viewer %s received comment %s (seq %d) of stream %s after seq %d", rc.Viewer, rc.Comment, rc.Seq, rc.Stream, last[k])
		}
		last[k] = max(last[k], rc.Seq)
		if archived[rc.Stream+"/"+rc.Comment] == 0 && len(in.Archive[rc.Stream]) > 0 {
			bad("viewer %s received comment %s of stream %s, which is not in the archive", rc.Viewer, rc.Comment, rc.Stream)
		}
	}
	for _, op := range in.Ops {
		if op.Kind != Comment || !op.OK || len(seen) == 0 {
			continue
		}
		all := true
		for k, ids := range seen {
			if k.stream == op.Channel && !ids[op.ID] {
				all = false
			}
		}
		if all {
			res.ReceivedAcked++
		}
	}
}

// place is where a nonce landed.
type place struct {
	channel string
	id      string
}

func landed2set(landed map[string][]place) map[string]bool {
	s := make(map[string]bool, len(landed))
	for n := range landed {
		s[n] = true
	}
	return s
}

func status(op Op) string {
	if op.OK {
		return "acknowledged " + op.ID
	}
	return "failed: " + op.Err
}

// chanInput is a porcupine operation's input: a send of Nonce, or a read
// of the newest Limit messages (all of them when Limit is 0).
type chanInput struct {
	channel string
	send    bool
	nonce   string
	limit   int
}

// channelModel is a channel as a sequential object: an append-only list
// of messages. A send appends its nonce; a read returns the newest limit
// nonces in order. Snowflake order must therefore agree with the order
// the sends took effect in.
func channelModel() porcupine.Model {
	return porcupine.Model{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			by := map[string][]porcupine.Operation{}
			var order []string
			for _, op := range h {
				c := op.Input.(chanInput).channel
				if _, ok := by[c]; !ok {
					order = append(order, c)
				}
				by[c] = append(by[c], op)
			}
			out := make([][]porcupine.Operation, 0, len(order))
			for _, c := range order {
				out = append(out, by[c])
			}
			return out
		},
		Init: func() any { return []string(nil) },
		Step: func(state, input, output any) (bool, any) {
			s := state.([]string)
			in := input.(chanInput)
			if in.send {
				next := make([]string, len(s), len(s)+1)
				copy(next, s)
				return true, append(next, in.nonce)
			}
			got := output.([]string)
			want := s
			if in.limit > 0 && len(want) > in.limit {
				want = want[len(want)-in.limit:]
			}
			return slices.Equal(got, want), s
		},
		Equal: func(a, b any) bool { return slices.Equal(a.([]string), b.([]string)) },
		Hash: func(state any) uint64 {
			h := fnv.New64a()
			for _, n := range state.([]string) {
				h.Write([]byte(n))
				h.Write([]byte{0})
			}
			return h.Sum64()
		},
		DescribeOperation: func(input, output any) string {
			in := input.(chanInput)
			if in.send {
				return "send " + in.nonce
			}
			return fmt.Sprintf("read %d -> %v", in.limit, output)
		},
	}
}

// prefixModel is channelModel for a history whose final whole-history
// read is known (final, oldest first, by channel): every linearization
// ends with that read, so the sends it linearizes are exactly the final
// list, in its order, and every state on the way is a prefix of it. The
// state is then the prefix's length: a send of nonce is legal only as
// the next message of the final list, a read only when it shows the
// newest messages of the prefix. The verdict is channelModel's (a send
// the final list lacks, or holds twice, can never be linearized; nor can
// a read of an order the final list contradicts), but a state is one
// integer instead of a list copied and hashed at every step, so a burst
// of a thousand sends is decided in a fraction of a second where the
// list model ran out of time (Unknown).
func prefixModel(final map[string][]string) porcupine.Model {
	m := channelModel()
	m.Init = func() any { return 0 }
	m.Step = func(state, input, output any) (bool, any) {
		k := state.(int)
		in := input.(chanInput)
		list := final[in.channel]
		if in.send {
			if k < len(list) && list[k] == in.nonce {
				return true, k + 1
			}
			return false, k
		}
		from := 0
		if in.limit > 0 && k > in.limit {
			from = k - in.limit
		}
		return slices.Equal(output.([]string), list[from:k]), k
	}
	m.Equal = func(a, b any) bool { return a.(int) == b.(int) }
	m.Hash = func(state any) uint64 { return uint64(state.(int)) }
	return m
}

// linearizable runs porcupine over each channel's sends and successful
// reads, the final whole-history read last. A failed send that nothing
// ever showed is left out (it had no visible effect, which is allowed);
// one that some read or the final history showed took effect at some
// point after its invocation, so it stays with no completion time.
func linearizable(in Input, landed, seenInRead map[string]bool) map[string]porcupine.CheckResult {
	var ops []porcupine.Operation
	var end int64
	for _, op := range in.Ops {
		if !op.Return.IsZero() && op.Return.UnixNano() > end {
			end = op.Return.UnixNano()
		}
	}
	chans := map[string]bool{}
	for _, op := range in.Ops {
		switch op.Kind {
		case Send:
			chans[op.Channel] = true
			ret := op.Return.UnixNano()
			if !op.OK {
				if !landed[op.Nonce] && !seenInRead[op.Nonce] {
					continue
				}
				ret = math.MaxInt64
			}
			ops = append(ops, porcupine.Operation{ClientId: op.Client, Input: chanInput{channel: op.Channel, send: true, nonce: op.Nonce},
				Call: op.Call.UnixNano(), Return: ret})
		case Read:
			if !op.OK {
				continue
			}
			chans[op.Channel] = true
			ops = append(ops, porcupine.Operation{ClientId: op.Client, Input: chanInput{channel: op.Channel, limit: op.Limit},
				Output: nonces(op.Msgs), Call: op.Call.UnixNano(), Return: op.Return.UnixNano()})
		}
	}
	for ch, msgs := range in.Final {
		chans[ch] = true
		ops = append(ops, porcupine.Operation{ClientId: -1, Input: chanInput{channel: ch}, Output: nonces(msgs),
			Call: end + 1, Return: end + 2})
	}
	timeout := in.Timeout
	if timeout == 0 {
		timeout = time.Minute
	}
	out := map[string]porcupine.CheckResult{}
	finals := make(map[string][]string, len(in.Final))
	for ch, msgs := range in.Final {
		finals[ch] = nonces(msgs)
	}
	list, prefix := channelModel(), prefixModel(finals)
	// One check per channel, so each verdict names its channel; with the
	// channel's final history the prefix model, else the list model.
	for _, part := range list.Partition(ops) {
		ch := part[0].Input.(chanInput).channel
		model := list
		if _, ok := in.Final[ch]; ok {
			model = prefix
		}
		out[ch] = porcupine.CheckOperationsTimeout(model, part, timeout)
	}
	for ch := range chans {
		if _, ok := out[ch]; !ok {
			out[ch] = porcupine.Ok
		}
	}
	return out
}

func nonces(msgs []Msg) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Nonce
	}
	return out
}

// staleReads lists reads that could not have been linearized, found
// directly: a read that began after a send was acknowledged and does not
// show it although its window reaches back to it (it returned fewer than
// its limit, or a message older than the send); a read that began after
// another read returned and misses a message that one showed, within its
// window.
func staleReads(ops []Op, final map[string][]Msg) []string {
	type ack struct {
		id    uint64
		nonce string
		ret   time.Time
	}
	acks := map[string][]ack{}
	reads := map[string][]Op{}
	for _, op := range ops {
		switch {
		case op.Kind == Send && op.OK:
			id, _ := strconv.ParseUint(op.ID, 10, 64)
			acks[op.Channel] = append(acks[op.Channel], ack{id, op.Nonce, op.Return})
		case op.Kind == Read && op.OK:
			reads[op.Channel] = append(reads[op.Channel], op)
		}
	}
	sends := map[string]Op{}
	for _, op := range ops {
		if op.Kind == Send {
			sends[op.Nonce] = op
		}
	}
	var out []string
	// Holes: a read showed messages on both sides of one it did not show
	// (and the final history has): that one became visible after newer
	// ones were, so no single order agrees with both reads.
	holes := map[string]bool{} // one line per message found in a hole
	for ch, rs := range reads {
		for _, r := range rs {
			if len(r.Msgs) == 0 || len(holes) >= 10 {
				continue
			}
			lo, _ := strconv.ParseUint(r.Msgs[0].ID, 10, 64)
			hi, _ := strconv.ParseUint(r.Msgs[len(r.Msgs)-1].ID, 10, 64)
			has := map[string]bool{}
			for _, m := range r.Msgs {
				has[m.ID] = true
			}
			for _, m := range final[ch] {
				id, _ := strconv.ParseUint(m.ID, 10, 64)
				if id <= lo || id >= hi || has[m.ID] || holes[m.Nonce] {
					continue
				}
				s := sends[m.Nonce]
				state := "acknowledged"
				switch {
				case !s.OK:
					state = "failed (" + s.Err + ")"
				case s.Return.After(r.Return):
					state = "acknowledged after the read returned"
				}
				out = append(out, fmt.Sprintf("channel %s: read %s–%s showed %s..%s without %s (id %s) between them; its send ran %s–%s, %s",
					ch, r.Call.Format("15:04:05.000"), r.Return.Format("15:04:05.000"), r.Msgs[0].Nonce, r.Msgs[len(r.Msgs)-1].Nonce,
					m.Nonce, m.ID, s.Call.Format("15:04:05.000"), s.Return.Format("15:04:05.000"), state))
				holes[m.Nonce] = true
				break
			}
		}
	}
	for ch, rs := range reads {
		sort.Slice(rs, func(i, j int) bool { return rs[i].Call.Before(rs[j].Call) })
		for i, r := range rs {
			has := map[string]bool{}
			var oldest uint64 = math.MaxUint64
			for _, m := range r.Msgs {
				has[m.Nonce] = true
				if id, _ := strconv.ParseUint(m.ID, 10, 64); id < oldest {
					oldest = id
				}
			}
			reaches := func(id uint64) bool { return len(r.Msgs) < r.Limit || id >= oldest }
			for _, a := range acks[ch] {
				if a.ret.Before(r.Call) && reaches(a.id) && !has[a.nonce] {
					out = append(out, fmt.Sprintf("channel %s: read at %s (%d messages) misses %s (id %d), acknowledged %v before the read began",
						ch, r.Call.Format("15:04:05.000"), len(r.Msgs), a.nonce, a.id, r.Call.Sub(a.ret).Round(time.Millisecond)))
					break
				}
			}
			// The latest earlier read that returned before this one began.
			for k := i - 1; k >= 0; k-- {
				p := rs[k]
				if !p.Return.Before(r.Call) {
					continue
				}
				for _, m := range p.Msgs {
					id, _ := strconv.ParseUint(m.ID, 10, 64)
					if reaches(id) && !has[m.Nonce] {
						out = append(out, fmt.Sprintf("channel %s: read at %s misses %s (id %s), which a read that returned %v earlier showed",
							ch, r.Call.Format("15:04:05.000"), m.Nonce, m.ID, r.Call.Sub(p.Return).Round(time.Millisecond)))
						break
					}
				}
				break
			}
			if len(out) >= 10 {
				return out
			}
		}
	}
	return out
}
