package entitlement

import (
	"context"
	"time"

	"github.com/concord-chat/concord/runtime/base/snowflake"
)

// watchRetry is how long Run waits before watching the Bus again after
// the watch could not start or ended.
const watchRetry = time.Second

// Run follows the Bus and renews leases until ctx ends, then waits for
// the renewals in flight. Until the first Snapshot arrives, and after a
// Lost until the next, Admit refuses bot identifies.
func (m *Manager) Run(ctx context.Context) {
	ticker := time.NewTicker(m.cfg.Resolution)
	defer ticker.Stop()
	retry := time.NewTimer(0)
	defer retry.Stop()
	var notices <-chan Notice
	for {
		select {
		case <-ctx.Done():
			m.pushUp.Store(false) // shutting down: no warning
			m.metrics.pushConnected.Set(0)
			m.wg.Wait()
			return
		case <-retry.C:
			ch, err := m.bus.Watch(ctx)
			if err != nil {
				m.log.Warn("revocation watch not started", "err", err)
				retry.Reset(watchRetry)
				continue
			}
			notices = ch
		case n, ok := <-notices:
			if !ok {
				notices = nil
				m.setPush(false)
				if ctx.Err() == nil {
					m.log.Warn("revocation watch ended; watching again")
					retry.Reset(watchRetry)
				}
				continue
			}
			m.Handle(ctx, n)
		case <-ticker.C:
			m.tick(ctx, false)
		}
	}
}

// setPush records whether pushes are being received.
func (m *Manager) setPush(up bool) {
	if m.pushUp.Swap(up) != up {
		if up {
			m.connectedOnce.Do(func() { close(m.connected) })
			m.metrics.pushConnected.Set(1)
			m.log.Info("revocation push connected")
		} else {
			m.metrics.pushConnected.Set(0)
			m.log.Warn("revocation push lost: new bot identifies refused, leases keep renewing")
		}
	}
}

// Handle applies one Notice of the Bus (Run calls it; tests call it
// directly). A Snapshot applies the revocations this node had not seen
// (missed while the watch was down) and marks pushes connected.
func (m *Manager) Handle(ctx context.Context, n Notice) {
	switch {
	case n.Lost:
		m.setPush(false)
		return
	case n.Snapshot:
		for _, r := range n.Revocations {
			if m.markSeen(r) {
				m.metrics.pushes.WithLabelValues("missed").Inc()
				m.applyPush(ctx, r, "push_missed")
			}
		}
		m.setPush(true)
	default:
		for _, r := range n.Revocations {
			if m.markSeen(r) {
				m.metrics.pushes.WithLabelValues("received").Inc()
				m.applyPush(ctx, r, "push")
			}
		}
	}
}

// markSeen records r as the latest revocation of its bot and reports
// whether it was new.
func (m *Manager) markSeen(r Revocation) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen[r.BotUserID] == r.ID {
		return false
	}
	m.seen[r.BotUserID] = r.ID
	return true
}

// applyPush acts on one revocation for the bot's sessions on this node
// and makes its lease re-read the Source at once. A revocation published
// before the lease's last read is already reflected in it and only
// triggers the re-read.
func (m *Manager) applyPush(ctx context.Context, r Revocation, via string) {
	m.mu.Lock()
	l := m.leases[r.BotUserID]
	if l == nil {
		m.mu.Unlock()
		return
	}
	l.epoch++
	l.next = m.cfg.Now()
	if r.At != 0 && r.At <= l.readAt.UnixNano() {
		m.mu.Unlock()
		return
	}
	var targets []guildSession
	switch r.Kind {
	case KindTokenReset:
		if r.TokenGeneration != 0 && r.TokenGeneration <= l.gen {
			break // the sessions already use the new token
		}
		delete(m.leases, r.BotUserID)
		m.metrics.leases.Set(float64(len(m.leases)))
		m.mu.Unlock()
		m.close(ctx, r.BotUserID, ReasonTokenReset, via)
		return
	case KindUninstall:
		// Acted on even when the lease never saw the guild installed
		// (installed since its last read): the push is the record.
		if r.GuildID != 0 && !l.revoked[r.GuildID] {
			targets = l.sessionsOn([]snowflake.ID{r.GuildID})
			delete(l.guilds, r.GuildID)
			l.revoked[r.GuildID] = true
		}
	case KindPermissions:
		// The guild actors evaluate permissions per event; the re-read
		// only refreshes the lease.
	}
	m.mu.Unlock()
	m.revoke(ctx, targets, via)
}

// Publish sends a revocation through the Bus, stamping its id and time,
// within ReadTimeout. A failed publish is logged and counted: the lease
// bounds what it costs.
func (m *Manager) Publish(ctx context.Context, r Revocation) error {
	if r.ID == "" {
		r.ID = NewID()
	}
	if r.At == 0 {
		r.At = m.cfg.Now().UnixNano()
	}
	// A registry that does not answer must not hold up the uninstall or
	// reset that publishes: the lease applies the revocation anyway.
	ctx, cancel := context.WithTimeout(ctx, m.cfg.ReadTimeout)
	defer cancel()
	if err := m.bus.Publish(ctx, r); err != nil {
		m.metrics.pushes.WithLabelValues("publish_error").Inc()
		m.log.Warn("revocation not pushed; leases will apply it", "kind", r.Kind, "bot_id", r.BotUserID, "guild_id", r.GuildID, "err", err)
		return err
	}
	m.metrics.pushes.WithLabelValues("published").Inc()
	return nil
}
