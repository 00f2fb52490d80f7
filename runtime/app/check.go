package app

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/config"
	"github.com/concord-chat/concord/runtime/services/presencerole"
	"github.com/concord-chat/concord/runtime/services/readstaterole"
	"github.com/concord-chat/concord/runtime/services/voicerole"
)

// Names are the names of the tables' roles, in build order.
func (t Tables) Names() []string {
	var out []string
	for _, r := range slices.Concat(t.Chat, t.Table) {
		out = append(out, r.Name)
	}
	return out
}

// DefaultRoles are the roles of a `concord serve` node given no --roles:
// every chat role but data, which only matters with --data-nodes=ring,
// and readstate, which needs Kafka (--eventlog=kafka://...).
var DefaultRoles = []string{registry.RoleGateway, registry.RoleAPI, registry.RoleGuild}

// coreRoles are the roles a process runs at the least to keep a local
// store (Pebble) or the embedded etcd to itself: the data role is
// optional even for one process.
var coreRoles = []string{registry.RoleGateway, registry.RoleAPI, registry.RoleGuild}

// Check completes cfg (config.Complete) and checks it against the roles
// it names, the one set of rules for `concord dev` and `concord serve`.
// inProc reports whether cfg runs every role of t: then every seam is in
// the process and it opens no registry (a registry setting only carries
// the bot platform's revocation bus: embedded etcd or in memory).
func Check(c Config, t Tables) (_ Config, inProc bool, err error) {
	names := t.Names()
	if len(c.Roles) == 0 {
		return c, false, errors.New("no roles")
	}
	for _, r := range c.Roles {
		if !slices.Contains(names, r) {
			return c, false, fmt.Errorf("unknown role %q (want %s)", r, strings.Join(names, ", "))
		}
	}
	if c, err = c.Complete(); err != nil {
		return c, false, err
	}
	if has(c, presencerole.Name) {
		c.Presence.Enabled = true
	}
	if err := validatePod(c); err != nil {
		return c, false, err
	}
	inProc = true
	for _, r := range names {
		inProc = inProc && has(c, r)
	}
	if inProc {
		if c.Voice.TLS == "" {
			// The in-process SFU's gateway serves TLS from the dev CA.
			c.Voice.TLS = "devca"
		}
		switch {
		case c.Registry != "mem" && c.Registry != "embedded":
			return c, true, fmt.Errorf("--registry=%s: a process running every role keeps its registry to itself (embedded or mem); "+
				"run some roles per process to join a cluster", config.RedactURL(c.Registry))
		case c.DataNodes == config.DataRing:
			return c, true, errors.New("--data-nodes=ring sends message reads and writes to other processes: a process running every role has none")
		case c.SnowflakeAuto:
			return c, true, errors.New("--snowflake-id=auto claims a pair in a cluster's registry: a process running every role has none (set --worker/--process)")
		}
		return c, true, nil
	}
	switch ev := c.EventLog; {
	case ev == "mem" || ev == "memlog":
		if has(c, readstaterole.Name) {
			return c, false, errors.New("the readstate role consumes the shared event log: set --eventlog=kafka://host:port on every node")
		}
	case kafkaLog(ev):
	default:
		return c, false, fmt.Errorf("--eventlog=%q: processes of a cluster share only kafka://host:port", config.RedactURL(ev))
	}
	if !sharedStore(c.Store) && c.Store != "" && !strings.HasPrefix(c.Store, "pebble:") {
		return c, false, fmt.Errorf("unknown --store %q (want cassandra://host:port/keyspace, or pebble:DIR for a single process)", config.RedactURL(c.Store))
	}
	if has(c, registry.RoleData) && !sharedStore(c.Store) {
		return c, false, fmt.Errorf("the data role needs a shared store (--store=cassandra://host:port/keyspace), not %q", c.Store)
	}
	if !coreAll(c) && !sharedStore(c.Store) && !storeless(c) {
		return c, false, fmt.Errorf("--store=%q is not shared between processes; a node running only %s needs "+
			"--store=cassandra://host:port/keyspace (a Pebble store serves one process running every role)",
			c.Store, strings.Join(c.Roles, ","))
	}
	if !coreAll(c) && c.ServerKey == "" {
		return c, false, errors.New("nodes running some roles must share the token key: set --server-key")
	}
	return c, false, nil
}

// has reports whether c runs role.
func has(c Config, role string) bool { return slices.Contains(c.Roles, role) }

// coreAll reports whether c runs gateway, api and guild.
func coreAll(c Config) bool {
	for _, r := range coreRoles {
		if !has(c, r) {
			return false
		}
	}
	return true
}

// storeless reports whether a node runs only roles that keep nothing in
// the chat store (voice): it needs no shared store.
func storeless(c Config) bool {
	for _, r := range c.Roles {
		if r != voicerole.Name {
			return false
		}
	}
	return len(c.Roles) > 0
}

// sharedStore reports whether a --store URL names a store several
// processes can share.
func sharedStore(url string) bool {
	return strings.HasPrefix(url, "cassandra://") || strings.HasPrefix(url, "scylla://")
}

// kafkaLog reports whether an --eventlog URL names Kafka, the only event
// log processes of a cluster can share.
func kafkaLog(spec string) bool { return strings.HasPrefix(spec, "kafka://") }
