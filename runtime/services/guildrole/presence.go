package guildrole

import (
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/concord-chat/concord/runtime/base/shed"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/presence"
	"github.com/concord-chat/concord/runtime/domain/typing"
)

// presenceCache is a guild node's guild.PresenceSource: the presences the
// presence node broadcast to it. A guild node that starts (or takes a
// guild over) sees members offline until their next change; the presence
// node does not re-announce unchanged statuses.
type presenceCache struct {
	mu sync.Mutex
	m  map[snowflake.ID]presence.Presence
}

func newPresenceCache() *presenceCache {
	return &presenceCache{m: make(map[snowflake.ID]presence.Presence)}
}

// Get implements guild.PresenceSource.
func (c *presenceCache) Get(userID snowflake.ID) presence.Presence {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.m[userID]; ok {
		return p
	}
	return presence.OfflinePresence()
}

func (c *presenceCache) set(userID snowflake.ID, p presence.Presence) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.Status == presence.Offline {
		delete(c.m, userID)
		return
	}
	c.m[userID] = p
}

// enableGuildPresence turns on presence, member lists and focused typing
// in a guild node's service, as the single-process platform does, with
// the presences the presence node broadcasts as their source.
func enableGuildPresence(svc *guild.Service, reg prometheus.Registerer) (*presenceCache, error) {
	tracker, err := typing.New(typing.Config{Registerer: reg})
	if err != nil {
		return nil, fmt.Errorf("guild role: typing: %w", err)
	}
	shedder, err := shed.New(shed.Config{Registerer: reg})
	if err != nil {
		return nil, fmt.Errorf("guild role: shed: %w", err)
	}
	cache := newPresenceCache()
	svc.EnablePresence(guild.PresenceConfig{Source: cache, Tracker: tracker, Shedder: shedder})
	return cache, nil
}
