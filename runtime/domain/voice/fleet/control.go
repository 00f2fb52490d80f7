package fleet

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/concord-chat/concord/runtime/adapters/registry"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/voice"
	"github.com/concord-chat/concord/runtime/domain/voice/token"
)

// NodeRole is the registry role of the processes that run SFUs (the voice
// role's name): their entries carry the HTTP address commands go to.
const NodeRole = "voice"

// maxQueued bounds the commands waiting for one server; past it a command
// is dropped with a log line (the server is unreachable, and the call will
// move off it).
const maxQueued = 1024

var (
	_ guild.VoiceControl       = (*Registry)(nil)
	_ guild.VoiceCommandSigner = (*Registry)(nil)
)

// commandQueue holds one server's commands in the order the guilds decided
// them; one goroutine at a time delivers them.
type commandQueue struct {
	cmds    []string
	running bool
}

// UseSigningKey implements guild.VoiceCommandSigner: commands are signed
// with the admission key. Without it the Registry commands nothing.
func (r *Registry) UseSigningKey(key ed25519.PrivateKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.key = key
}

// Disconnect implements guild.VoiceControl: the server drops the user.
func (r *Registry) Disconnect(_ context.Context, server string, guildID, channelID, userID snowflake.ID) {
	r.command(token.Command{Server: server, Op: token.OpDisconnect, GuildID: guildID, ChannelID: channelID, UserID: userID})
}

// SetServerVoiceState implements guild.VoiceControl: the server stops
// forwarding a muted user and sending to a deafened one.
func (r *Registry) SetServerVoiceState(_ context.Context, server string, guildID, channelID, userID snowflake.ID, mute, deaf bool) {
	r.command(token.Command{Server: server, Op: token.OpState, GuildID: guildID, ChannelID: channelID, UserID: userID, Mute: mute, Deaf: deaf})
}

// command signs c now (it is called inside a guild actor, so the decision
// time is now) and queues it for its server; it never blocks on the
// network.
func (r *Registry) command(c token.Command) {
	r.mu.Lock()
	key := r.key
	r.mu.Unlock()
	if key == nil {
		r.cfg.Logger.Warn("voice command not sent: the fleet has no signing key", "server", c.Server, "op", c.Op)
		return
	}
	signed, err := token.SignCommand(key, c, r.cfg.Now())
	if err != nil {
		r.cfg.Logger.Warn("voice command not signed", "server", c.Server, "op", c.Op, "err", err)
		return
	}
	r.mu.Lock()
	q := r.queues[c.Server]
	if q == nil {
		q = &commandQueue{}
		r.queues[c.Server] = q
	}
	if len(q.cmds) >= maxQueued {
		r.mu.Unlock()
		r.cfg.Logger.Warn("voice command dropped: too many queued for the server", "server", c.Server, "op", c.Op)
		return
	}
	q.cmds = append(q.cmds, signed)
	start := !q.running
	q.running = true
	r.mu.Unlock()
	if start {
		go r.deliverQueue(c.Server, q)
	}
}

// deliverQueue posts q's commands in order until it is empty.
func (r *Registry) deliverQueue(server string, q *commandQueue) {
	for {
		r.mu.Lock()
		if len(q.cmds) == 0 {
			q.running = false
			delete(r.queues, server)
			r.mu.Unlock()
			return
		}
		cmd := q.cmds[0]
		q.cmds = q.cmds[1:]
		r.mu.Unlock()
		r.deliver(server, cmd)
	}
}

// deliver posts one command, retrying a failed attempt while the command
// is valid: a server that stays unreachable is failing, and its calls
// move off it anyway.
func (r *Registry) deliver(server, cmd string) {
	deadline := r.cfg.Now().Add(token.CommandTTL)
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := r.post(server, cmd)
		if err == nil {
			return
		}
		if !r.cfg.Now().Add(backoff).Before(deadline) || attempt >= 6 {
			r.cfg.Logger.Warn("voice command not delivered", "server", server, "attempts", attempt, "err", err)
			return
		}
		r.cfg.Logger.Debug("voice command failed; retrying", "server", server, "attempt", attempt, "err", err)
		time.Sleep(backoff)
		backoff *= 2
	}
}

// post sends cmd to the server's node; a refusal (4xx) is not retried.
func (r *Registry) post(server, cmd string) error {
	addr, err := r.controlAddr(server)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+voice.ControlPath, strings.NewReader(cmd))
	if err != nil {
		return fmt.Errorf("fleet: command request: %w", err)
	}
	req.Header.Set("Content-Type", "text/plain")
	resp, err := r.cfg.Client.Do(req)
	if err != nil {
		return fmt.Errorf("fleet: command to %s: %w", server, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch {
	case resp.StatusCode == http.StatusOK:
		return nil
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		r.cfg.Logger.Warn("voice command refused", "server", server, "status", resp.Status, "msg", string(bytes.TrimSpace(msg)))
		return nil
	}
	return fmt.Errorf("fleet: command to %s: %s: %s", server, resp.Status, bytes.TrimSpace(msg))
}

// controlAddr is the HTTP address of the node hosting server.
func (r *Registry) controlAddr(server string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	node := server
	if l, ok := r.loads[server]; ok && l.Node != "" {
		node = l.Node
	}
	addr := r.nodes[node]
	if addr == "" {
		return "", fmt.Errorf("fleet: voice server %s: node %q has no HTTP address in the registry", server, node)
	}
	return addr, nil
}

// watchNodes keeps the voice nodes' HTTP addresses current until ctx ends.
func (r *Registry) watchNodes(ctx context.Context) {
	for ctx.Err() == nil {
		ch, err := r.reg.Watch(ctx, NodeRole)
		if err != nil {
			r.cfg.Logger.Warn("voice fleet: watch voice nodes", "err", err)
		} else {
			for snap := range ch {
				r.setNodes(snap.Nodes)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(r.cfg.Poll):
		}
	}
}

func (r *Registry) setNodes(nodes []registry.Node) {
	m := make(map[string]string, len(nodes))
	for _, n := range nodes {
		if n.HTTPAddr != "" {
			m[n.Name] = n.HTTPAddr
		}
	}
	r.mu.Lock()
	r.nodes = m
	r.mu.Unlock()
	r.seenOnce.Do(func() { close(r.seen) })
}
