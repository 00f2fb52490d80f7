package transport

import (
	"encoding/json"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/services/transport/transportpb"
)

// sessionToPB encodes s.
func sessionToPB(s event.Session) *transportpb.Session {
	return &transportpb.Session{
		Id:         string(s.ID),
		UserId:     uint64(s.UserID),
		Bot:        s.Bot,
		Intents:    s.Intents,
		ShardId:    int32(s.ShardID),
		ShardCount: int32(s.ShardCount),
		Node:       s.Node,

		LargeThreshold: int32(s.LargeThreshold),
	}
}

// sessionFromPB decodes p; ok is false when it names no session.
func sessionFromPB(p *transportpb.Session) (s event.Session, ok bool) {
	if p == nil || p.Id == "" {
		return event.Session{}, false
	}
	return event.Session{
		ID:         event.SessionID(p.Id),
		UserID:     snowflake.ID(p.UserId),
		Bot:        p.Bot,
		Intents:    p.Intents,
		ShardID:    int(p.ShardId),
		ShardCount: int(p.ShardCount),
		Node:       p.Node,

		LargeThreshold: int(p.LargeThreshold),
	}, true
}

// fillDeliver encodes b for node into req, reusing req's slices. The
// payload bytes are shared with b, not copied.
func fillDeliver(req *transportpb.DeliverRequest, node string, b event.Batch) {
	req.Node = node
	req.Type = b.Type
	req.Payloads = req.Payloads[:0]
	for _, p := range b.Payloads {
		req.Payloads = append(req.Payloads, p)
	}
	req.SessionIds = req.SessionIds[:0]
	req.SessionIdLengths = req.SessionIdLengths[:0]
	req.Variants = req.Variants[:0]
	allZero := true
	for _, t := range b.Targets {
		req.SessionIds = append(req.SessionIds, t.Session...)
		req.SessionIdLengths = append(req.SessionIdLengths, uint32(len(t.Session)))
		if t.Variant != 0 {
			allZero = false
		}
	}
	if !allZero {
		for _, t := range b.Targets {
			req.Variants = append(req.Variants, uint32(t.Variant))
		}
	}
}

// batchFromPB decodes req; ok is false when it is malformed (lengths that
// do not add up, variants of the wrong count or naming a missing payload).
// The session ids share one string.
func batchFromPB(req *transportpb.DeliverRequest) (b event.Batch, ok bool) {
	n := len(req.SessionIdLengths)
	if len(req.Variants) != 0 && len(req.Variants) != n {
		return event.Batch{}, false
	}
	b.Type = req.Type
	b.Payloads = make([]json.RawMessage, len(req.Payloads))
	for i, p := range req.Payloads {
		b.Payloads[i] = p
	}
	ids := string(req.SessionIds)
	b.Targets = make([]event.Target, n)
	off := 0
	for i, l := range req.SessionIdLengths {
		end := off + int(l)
		if end > len(ids) || end < off {
			return event.Batch{}, false
		}
		v := 0
		if len(req.Variants) != 0 {
			v = int(req.Variants[i])
			if v >= len(req.Payloads) {
				return event.Batch{}, false
			}
		}
		b.Targets[i] = event.Target{Session: event.SessionID(ids[off:end]), Variant: v}
		off = end
	}
	if off != len(ids) {
		return event.Batch{}, false
	}
	return b, true
}
