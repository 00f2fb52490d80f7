package api

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/domain/wire"
)

// guildSteps counts the operations the env's guild actors ran: each is
// one observation of concord_guild_event_age_seconds, whichever call
// queued it.
func (e *env) guildSteps() uint64 {
	e.t.Helper()
	if e.metrics == nil {
		e.t.Skip("in-process only: it counts the steps of this process's guild actors")
	}
	return sampleCount(e.t, e.metrics, "concord_guild_event_age_seconds")
}

func sampleCount(t testing.TB, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatalf("no %s", name)
	return 0
}

// TestMessageWritesEnterTheGuildActorOnce: POST /channels/{id}/messages
// — permissions, slowmode, the id, the store write with its event and the
// fan-out — enters the guild's actor once, and so does a webhook's
// message; an edit and a delete of one's own message enter it once after
// the read decision that tells whether the message exists.
func TestMessageWritesEnterTheGuildActorOnce(t *testing.T) {
	e := newEnv(t)
	w := e.world()
	// settled is the step count once every step queued so far has run:
	// a step is counted when the actor takes it, and a request may leave
	// steps it posted without waiting (the WEBHOOKS_UPDATE and audit
	// events of a webhook's creation) to be taken after its response.
	// GuildInfo is one step that waits, taken after all queued before it.
	settled := func() uint64 {
		t.Helper()
		if e.metrics != nil {
			if _, err := e.guilds.GuildInfo(t.Context(), w.alice.ID, w.guildID); err != nil {
				t.Fatal(err)
			}
		}
		return e.guildSteps()
	}
	steps := func(what string, want uint64, do func()) {
		t.Helper()
		before := settled()
		do()
		if n := settled() - before - 1; n != want {
			t.Errorf("%s entered the guild's actor %d times, want %d", what, n, want)
		}
	}
	var sent wire.Message
	steps("a send", 1, func() {
		sent = e.post(w.alice.Token, w.general, map[string]any{"content": fmt.Sprintf("hi <@%d>", w.bob.ID), "nonce": "n1", "enforce_nonce": true})
	})
	wh := e.createWebhook(w.alice.Token, w.general, "Logger")
	steps("a webhook's message", 1, func() {
		e.ok("POST", whPath(wh)+"?wait=true", "", map[string]any{"content": "from the hook"}, nil)
	})
	steps("an edit", 2, func() {
		e.ok("PATCH", fmt.Sprintf("%s/channels/%d/messages/%d", v10, w.general, sent.ID), w.alice.Token, map[string]any{"content": "edited"}, nil)
	})
	steps("a delete", 2, func() {
		if r := e.call("DELETE", fmt.Sprintf("%s/channels/%d/messages/%d", v10, w.general, sent.ID), w.alice.Token, nil); r.Status != 204 {
			t.Fatalf("delete status %d", r.Status)
		}
	})
}
