//go:build e2e

package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/concord-chat/concord/runtime/domain/live/livetest"
)

// TestLiveStream: a live stream through the live roles' Services, as
// viewers and the player's backend would use them: the creator (an
// account of the chat API) creates a stream and posts comments through
// the live-api Service; a viewer watching over SSE through the
// live-gateway Service sees the stream's state and each comment in order,
// its SSE id equal to the comment's seq; one more viewer opening the
// stream afterwards gets the comments as its snapshot (the router filled
// the recent cache in Redis, which every live-gateway pod reads).
func TestLiveStream(t *testing.T) {
	ctx := context.Background()
	api, err := serviceAddr(ctx, clusterName+"-live-api")
	if err != nil {
		t.Fatal(err)
	}
	gw, err := serviceAddr(ctx, clusterName+"-live-gateway")
	if err != nil {
		t.Fatal(err)
	}
	e := livetest.Remote(t, "http://"+api, livetest.RemoteRoles{})
	creator := livetest.Register("http://" + router)(t)
	s := e.CreateStream(creator, "e2e "+runID)

	v := livetest.Watch(t, "http://"+gw, s.ID, livetest.Auth(creator.Token, ""), "")
	st := v.Next(time.Minute, "state")
	var state struct{ State string }
	if err := json.Unmarshal(st.Data, &state); err != nil || state.State != "live" {
		t.Fatalf("state event %s, want live (%v)", st.Data, err)
	}
	var posted []livetest.Comment
	for i := range 5 {
		posted = append(posted, e.Post(creator, s.ID, fmt.Sprintf("comment %d", i), int64(i*1000)))
	}
	for i, p := range posted {
		ev := v.Next(time.Minute, "comment")
		var c livetest.Comment
		if err := json.Unmarshal(ev.Data, &c); err != nil {
			t.Fatalf("comment event %s: %v", ev.Data, err)
		}
		if c.ID != p.ID || c.Text != p.Text || ev.ID != strconv.FormatInt(p.Seq, 10) {
			t.Fatalf("comment %d on the live-gateway Service: id %s seq %s %q, want id %s seq %d %q", i, c.ID, ev.ID, c.Text, p.ID, p.Seq, p.Text)
		}
	}
	late := livetest.Watch(t, "http://"+gw, s.ID, nil, "")
	late.Next(time.Minute, "state")
	snap := late.Comments(len(posted), time.Minute)
	for i, c := range snap {
		if c.ID != posted[i].ID {
			t.Fatalf("late viewer's snapshot[%d] is %s, want %s", i, c.ID, posted[i].ID)
		}
	}
}
