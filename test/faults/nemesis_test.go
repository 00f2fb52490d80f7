//go:build faults

package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fault is one step of a schedule.
type fault struct {
	// kind: kill (SIGKILL, held down, restarted), isolate (cut one process
	// off from every other), split (a minority of one node of each
	// replicated system and one guild node against the rest), oneway
	// (drop what one process sends another), pause (SIGSTOP, SIGCONT),
	// skew (a Cassandra node restarted with its clock moved by
	// libfaketime, then restarted right), redis (every Concord node cut
	// off from Redis: what it sends there is dropped; the shared Redis
	// itself is untouched), gateway (kill -9 the gateway node holding
	// most of the recorded sessions, held down, restarted: its sessions
	// resume or identify again elsewhere), clock (the wall clock of the
	// guild node that owns the test guild, found when the fault acts,
	// moved by skew through Concord's clock seam, --fault-clock-file,
	// then put right: its snowflake ids jump ahead or behind).
	kind    string
	targets []string
	hold    time.Duration
	skew    string // skew: the libfaketime offset; clock: the seam's
}

func (f fault) String() string {
	s := fmt.Sprintf("%s %s for %v", f.kind, strings.Join(f.targets, ","), f.hold)
	if f.skew != "" {
		s += " (clock " + f.skew + ")"
	}
	return s
}

// sessionsGateway stands, in a planned gateway fault, for the gateway
// node that holds most of the recorded sessions when the fault acts.
const sessionsGateway = "gateway-of-sessions"

// guildOwner stands, in a planned clock fault, for the guild node that
// owns the test guild when the fault acts (the node whose snowflake pair
// minted the last acknowledged message).
const guildOwner = "owner-of-the-guild"

// window is when a fault acted: from start until healed (the process
// back, the rules gone).
type window struct {
	f             fault
	start, healed time.Time
	err           error
	// note says what the fault found when it acted (the sessions a
	// killed gateway node held).
	note string
}

// nemesis acts out a schedule on the targets.
type nemesis struct {
	t       *testing.T
	net     *net
	targets map[string]*target
	replDir string
	// redis is where the live roles' Redis listens (the redis fault).
	redis endpoint
	// gateways counts the open gateway connections of each gateway node
	// (HAProxy's scur of its gateways backend): the recorded sessions
	// are the only gateway clients while the faults act.
	gateways func() (map[string]int, error)
	// owner names the guild node that owns the test guild (the clock
	// fault).
	owner func() (string, error)
	logf  func(format string, args ...any)
}

// sessionsNode is the gateway node with the most open gateway
// connections (the lowest name on a tie), and how many it and all hold.
func (n *nemesis) sessionsNode() (name string, held, all int, err error) {
	if n.gateways == nil {
		return "", 0, 0, fmt.Errorf("no way to find the sessions' gateway node")
	}
	conns, err := n.gateways()
	if err != nil {
		return "", 0, 0, fmt.Errorf("gateway connections: %w", err)
	}
	names := make([]string, 0, len(conns))
	for s := range conns {
		names = append(names, s)
	}
	sort.Strings(names)
	for _, s := range names {
		all += conns[s]
		if name == "" || conns[s] > held {
			name, held = s, conns[s]
		}
	}
	if held == 0 {
		return "", 0, all, fmt.Errorf("no gateway node holds a session (connections %v)", conns)
	}
	return name, held, all, nil
}

// plan draws a schedule from seed: "short" is one partition (a minority
// split) and one replica loss (a Cassandra node killed and restarted);
// "clients" is the faults users of the gateway and the live comments
// notice first (Redis cut off, the sessions' gateway node killed, Redis
// killed); "full" is n faults of every kind (a kill may draw any process,
// Redis included).
func plan(seed uint64, schedule string, n int, names map[string][]string) []fault {
	rng := rand.New(rand.NewPCG(seed, seed>>32|1))
	pick := func(kind string) string { l := names[kind]; return l[rng.IntN(len(l))] }
	minority := func() []string {
		i := 1 + rng.IntN(3)
		return []string{fmt.Sprintf("cassandra-%d", i), fmt.Sprintf("kafka-%d", i), fmt.Sprintf("etcd-%d", i), pick("guild")}
	}
	hold := func() time.Duration { return time.Duration(10+rng.IntN(11)) * time.Second }
	if schedule == "none" { // the workload and the checker alone: a baseline
		return nil
	}
	if schedule == "short" {
		return []fault{
			{kind: "split", targets: minority(), hold: 20 * time.Second},
			{kind: "kill", targets: []string{pick("cassandra")}, hold: 15 * time.Second},
		}
	}
	// The gateway fault kills the node that holds the recorded
	// sessions, found when it acts (sessionsGateway): a node holding
	// none of them measures nothing of RESUME. The draw a random pick
	// took is still taken, so seeds drawn before keep the rest of their
	// schedule.
	gateway := func() string {
		n := 0
		for _, name := range names["concord"] {
			if strings.HasPrefix(name, "gateway-") {
				n++
			}
		}
		if n > 0 {
			_ = rng.IntN(n)
		}
		return sessionsGateway
	}
	if schedule == "clock" { // the clock seam alone: the owner's clock 45 s ahead, then 45 s behind
		return []fault{
			{kind: "clock", targets: []string{guildOwner}, hold: 15 * time.Second, skew: "+45s"},
			{kind: "clock", targets: []string{guildOwner}, hold: 15 * time.Second, skew: "-45s"},
		}
	}
	if schedule == "clients" {
		return []fault{
			{kind: "redis", targets: []string{"redis"}, hold: 15 * time.Second},
			{kind: "gateway", targets: []string{gateway()}, hold: 15 * time.Second},
			{kind: "kill", targets: []string{"redis"}, hold: 15 * time.Second},
		}
	}
	var out []fault
	kinds := []string{"kill", "isolate", "split", "oneway", "pause", "skew", "redis", "gateway", "clock"}
	// Every kind once first, in an order of the seed's, then any.
	order := rng.Perm(len(kinds))
	for i := range n {
		f := fault{kind: kinds[rng.IntN(len(kinds))], hold: hold()}
		if i < len(order) {
			f.kind = kinds[order[i]]
		}
		switch f.kind {
		case "kill":
			pool := slices.Concat(names["cassandra"], names["kafka"], names["etcd"], names["concord"], names["redis"])
			f.targets = []string{pool[rng.IntN(len(pool))]}
		case "isolate":
			f.targets = []string{pick([]string{"cassandra", "kafka", "etcd", "guild"}[rng.IntN(4)])}
		case "split":
			f.targets = minority()
		case "oneway":
			kind := []string{"cassandra", "kafka", "etcd"}[rng.IntN(3)]
			l := names[kind]
			i := rng.IntN(len(l))
			j := (i + 1 + rng.IntN(len(l)-1)) % len(l)
			f.targets = []string{l[i], l[j]}
		case "pause":
			pool := slices.Concat(names["cassandra"], names["kafka"], names["etcd"], names["guild"], names["concord"])
			f.targets = []string{pool[rng.IntN(len(pool))]}
		case "skew":
			f.targets = []string{pick("cassandra")}
			f.skew = []string{"+45s", "-45s"}[rng.IntN(2)]
		case "redis":
			f.targets = []string{"redis"}
		case "gateway":
			f.targets = []string{gateway()}
		case "clock":
			f.targets = []string{guildOwner}
			f.skew = []string{"+45s", "-45s"}[rng.IntN(2)]
		}
		out = append(out, f)
	}
	return out
}

// attachAll moves every running target into its cgroup (a restarted
// process starts outside it).
func (n *nemesis) attachAll() error {
	for name, tg := range n.targets {
		if pid := tg.pid(); pid != 0 {
			if err := n.net.attach(name, pid); err != nil {
				return err
			}
		}
	}
	return nil
}

func (n *nemesis) endpoints(name string) ([]endpoint, error) {
	tg := n.targets[name]
	if tg == nil {
		return nil, fmt.Errorf("no target %s", name)
	}
	return tg.endpoints()
}

// partition builds the rules cutting group from every other target, both
// ways.
func (n *nemesis) partition(group []string) ([]rule, error) {
	in := map[string]bool{}
	for _, g := range group {
		in[g] = true
	}
	var rules []rule
	eps := map[string][]endpoint{}
	for name := range n.targets {
		e, err := n.endpoints(name)
		if err != nil {
			return nil, err
		}
		eps[name] = e
	}
	for _, a := range group {
		for b := range n.targets {
			if in[b] {
				continue
			}
			for _, e := range eps[b] {
				rules = append(rules, rule{from: a, to: e})
			}
			for _, e := range eps[a] {
				rules = append(rules, rule{from: b, to: e})
			}
		}
	}
	return rules, nil
}

// act performs f and undoes it; the returned window says when.
func (n *nemesis) act(ctx context.Context, f fault) (w window) {
	w.f = f
	n.logf("nemesis: %s", f)
	if f.kind == "gateway" && f.targets[0] == sessionsGateway {
		name, held, all, err := n.sessionsNode()
		if err != nil {
			w.start, w.healed, w.err = time.Now(), time.Now(), err
			n.logf("nemesis: %s: %v", f, err)
			return
		}
		f.targets = []string{name}
		w.f = f
		w.note = fmt.Sprintf("held %d of the %d gateway connections", held, all)
		n.logf("nemesis: the sessions' gateway node is %s (%s)", name, w.note)
	}
	if f.kind == "clock" && f.targets[0] == guildOwner {
		name, err := n.guildOwner()
		if err != nil {
			w.start, w.healed, w.err = time.Now(), time.Now(), err
			n.logf("nemesis: %s: %v", f, err)
			return
		}
		f.targets = []string{name}
		w.f = f
		n.logf("nemesis: the guild's owner is %s", name)
	}
	w.start = time.Now()
	defer func() {
		w.healed = time.Now()
		if w.err != nil {
			n.logf("nemesis: %s: %v", f, w.err)
		}
	}()
	tg := n.targets[f.targets[0]]
	if tg == nil && f.kind != "redis" {
		w.err = fmt.Errorf("no target %s", f.targets[0])
		return
	}
	hold := func() {
		select {
		case <-ctx.Done():
		case <-time.After(f.hold): // the fault's length is the schedule's, not an event's
		}
	}
	switch f.kind {
	case "kill", "gateway":
		if w.err = tg.kill(); w.err != nil {
			return
		}
		hold()
		w.err = tg.start(ctx)
	case "isolate", "split", "oneway":
		if w.err = n.attachAll(); w.err != nil {
			return
		}
		var rules []rule
		switch f.kind {
		case "isolate":
			rules, w.err = n.partition(f.targets)
		case "split":
			rules, w.err = n.partition(f.targets)
		case "oneway":
			var eps []endpoint
			eps, w.err = n.endpoints(f.targets[1])
			for _, e := range eps {
				rules = append(rules, rule{from: f.targets[0], to: e})
			}
		}
		if w.err != nil {
			return
		}
		if w.err = n.net.apply(rules); w.err != nil {
			return
		}
		hold()
		w.err = n.net.heal()
	case "redis":
		if w.err = n.attachAll(); w.err != nil {
			return
		}
		var rules []rule
		for name, t := range n.targets {
			if t.kind == "concord" {
				rules = append(rules, rule{from: name, to: n.redis})
			}
		}
		if w.err = n.net.apply(rules); w.err != nil {
			return
		}
		hold()
		w.err = n.net.heal()
	case "pause":
		pid := tg.pid()
		if pid == 0 {
			w.err = fmt.Errorf("%s is not running", tg.name)
			return
		}
		_ = syscall.Kill(pid, syscall.SIGSTOP)
		hold()
		w.err = syscall.Kill(pid, syscall.SIGCONT)
	case "skew":
		file := filepath.Join(n.replDir, tg.name, "faketime")
		if w.err = os.WriteFile(file, []byte(f.skew), 0o644); w.err != nil {
			return
		}
		defer os.Remove(file)
		if w.err = tg.kill(); w.err != nil {
			return
		}
		if w.err = tg.start(ctx); w.err != nil {
			// Whatever runs now runs skewed, or not at all: the node is
			// put back right, so that one failed fault does not skew
			// the rest of the run (or the next run: the servers stay).
			os.Remove(file)
			if tg.pid() != 0 {
				_ = tg.kill()
			}
			if err := tg.start(ctx); err != nil {
				w.err = fmt.Errorf("%w; restarting it unskewed: %v", w.err, err)
			}
			return
		}
		hold()
		os.Remove(file)
		if w.err = tg.kill(); w.err != nil {
			return
		}
		w.err = tg.start(ctx)
	case "clock":
		if tg.skewClock == nil {
			w.err = fmt.Errorf("%s has no clock seam", tg.name)
			return
		}
		var d time.Duration
		if d, w.err = time.ParseDuration(strings.TrimPrefix(f.skew, "+")); w.err != nil {
			return
		}
		if w.err = tg.skewClock(d); w.err != nil {
			return
		}
		hold()
		w.err = tg.skewClock(0)
	default:
		w.err = fmt.Errorf("unknown fault %q", f.kind)
	}
	return
}

// guildOwner is the guild node that owns the test guild.
func (n *nemesis) guildOwner() (string, error) {
	if n.owner == nil {
		return "", fmt.Errorf("no way to find the guild's owner")
	}
	return n.owner()
}

// names groups the targets' names by kind (and "guild" for guild nodes,
// "concord" for the other Concord nodes but HAProxy).
func groupNames(targets map[string]*target) map[string][]string {
	out := map[string][]string{}
	for name, tg := range targets {
		switch {
		case strings.HasPrefix(name, "guild-"):
			out["guild"] = append(out["guild"], name)
		case name == "haproxy":
		default:
			out[tg.kind] = append(out[tg.kind], name)
		}
	}
	for _, l := range out {
		sort.Strings(l)
	}
	return out
}
