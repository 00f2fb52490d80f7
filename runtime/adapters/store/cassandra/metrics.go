package cassandra

import (
	"context"
	"slices"
	"strings"
	"sync"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// Store metrics, observed on every statement the driver sends (paged
// reads count once per page). The seed's advice: watch read rate and p99
// per partition — a hot partition is one key far above the rest.
var (
	queryDuration = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "concord_store_cassandra_query_duration_seconds",
		Help:    "Latency of Cassandra statements by table and kind (select, insert, delete, batch).",
		Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16),
	}, []string{"table", "kind"})
	queryErrors = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "concord_store_cassandra_query_errors_total",
		Help: "Cassandra statements that failed, by table and kind.",
	}, []string{"table", "kind"})
)

// observer feeds the metrics and the hot-partition counter.
type observer struct {
	labels sync.Map // statement -> [2]string{table, kind}
	hot    *hotPartitions
}

func (o *observer) statementLabels(stmt string) [2]string {
	if v, ok := o.labels.Load(stmt); ok {
		return v.([2]string)
	}
	f := strings.Fields(strings.ToLower(stmt))
	kind, table := "other", "other"
	if len(f) > 0 {
		kind = f[0]
	}
	for i, w := range f {
		if (w == "from" || w == "into" || w == "update") && i+1 < len(f) {
			table = strings.Trim(f[i+1], "(")
			break
		}
	}
	l := [2]string{table, kind}
	o.labels.Store(stmt, l)
	return l
}

// ObserveQuery implements gocql.QueryObserver.
func (o *observer) ObserveQuery(_ context.Context, q gocql.ObservedQuery) {
	l := o.statementLabels(q.Statement)
	queryDuration.WithLabelValues(l[0], l[1]).Observe(q.End.Sub(q.Start).Seconds())
	if q.Err != nil {
		queryErrors.WithLabelValues(l[0], l[1]).Inc()
	}
	if l[0] == "messages" && l[1] == "select" && len(q.Values) >= 2 {
		ch, ok1 := q.Values[0].(int64)
		b, ok2 := q.Values[1].(int64)
		if ok1 && ok2 {
			o.hot.add(Partition{ChannelID: snowflake.ID(ch), Bucket: b})
		}
	}
}

// ObserveBatch implements gocql.BatchObserver.
func (o *observer) ObserveBatch(_ context.Context, b gocql.ObservedBatch) {
	table := "other"
	if len(b.Statements) > 0 {
		table = o.statementLabels(b.Statements[0])[0]
	}
	queryDuration.WithLabelValues(table, "batch").Observe(b.End.Sub(b.Start).Seconds())
	if b.Err != nil {
		queryErrors.WithLabelValues(table, "batch").Inc()
	}
}

// Partition is one messages partition.
type Partition struct {
	ChannelID snowflake.ID
	Bucket    int64
}

// PartitionReads is a partition with its read count (an upper bound: the
// counter is a space-saving top-K, exact for partitions that stayed in it).
type PartitionReads struct {
	Partition
	Reads uint64
}

type hotPartitions struct {
	mu sync.Mutex
	k  int
	m  map[Partition]uint64
}

func newHotPartitions(k int) *hotPartitions {
	return &hotPartitions{k: k, m: make(map[Partition]uint64, k)}
}

func (h *hotPartitions) add(p Partition) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.m[p]; !ok && len(h.m) >= h.k {
		var minP Partition
		minN := ^uint64(0)
		for q, n := range h.m {
			if n < minN {
				minP, minN = q, n
			}
		}
		delete(h.m, minP)
		h.m[p] = minN
	}
	h.m[p]++
}

func (h *hotPartitions) top(n int) []PartitionReads {
	h.mu.Lock()
	out := make([]PartitionReads, 0, len(h.m))
	for p, c := range h.m {
		out = append(out, PartitionReads{Partition: p, Reads: c})
	}
	h.mu.Unlock()
	slices.SortFunc(out, func(a, b PartitionReads) int {
		if a.Reads != b.Reads {
			if a.Reads > b.Reads {
				return -1
			}
			return 1
		}
		if a.ChannelID != b.ChannelID {
			if a.ChannelID < b.ChannelID {
				return -1
			}
			return 1
		}
		return int(a.Bucket - b.Bucket)
	})
	return out[:min(n, len(out))]
}

// HotPartitions returns up to n messages partitions this process read
// most (page reads counted), busiest first.
func (s *Store) HotPartitions(n int) []PartitionReads { return s.obs.hot.top(n) }
