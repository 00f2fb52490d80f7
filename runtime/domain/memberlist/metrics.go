package memberlist

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

// opsSent counts member-list operations by kind as sessions receive them:
// the one-guild dashboard's member-list panel. It is process-wide, not
// per guild: a guild label would make one series per guild, and the
// guild actor's top-K series already name the busy guilds.
var opsSent = promauto.NewCounterVec(prometheus.CounterOpts{
	Name: "concord_memberlist_ops_total",
	Help: "GUILD_MEMBER_LIST_UPDATE operations sent, by op (SYNC, INSERT, UPDATE, DELETE, INVALIDATE), one per receiving session.",
}, []string{"op"})

// opCounters are opsSent's children resolved once, so counting costs an
// atomic add per variant and op, not a label lookup.
var opCounters = func() map[string]prometheus.Counter {
	m := map[string]prometheus.Counter{}
	for _, op := range []string{OpSync, OpInsert, OpUpdate, OpDelete, OpInvalidate} {
		m[op] = opsSent.WithLabelValues(op)
	}
	return m
}()

// countOps adds d's operations to opsSent.
func countOps(d Dispatch) {
	for _, v := range d.Variants {
		for _, op := range v.Ops {
			if c := opCounters[op.Op]; c != nil {
				c.Add(float64(len(v.Sessions)))
			}
		}
	}
}
