package fleet

import (
	"context"
	"sync"

	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/guild"
	"github.com/concord-chat/concord/runtime/domain/voice"
)

// Local is the voice fleet of one process: the SFUs `concord dev` runs
// in-process. It reads their load directly and acts on their calls
// (guild.VoiceControl) by calling them.
type Local struct {
	mu      sync.Mutex
	servers map[string]*voice.Server
	quality *qualities
}

var (
	_ guild.VoiceAllocator = (*Local)(nil)
	_ guild.VoiceControl   = (*Local)(nil)
	_ guild.VoiceNearest   = (*Local)(nil)
)

// NewLocal returns an empty fleet.
func NewLocal() *Local { return &Local{servers: map[string]*voice.Server{}, quality: newQualities()} }

// Add puts s in the fleet; Remove takes it out (the server stopped).
func (l *Local) Add(s *voice.Server) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.servers[s.ID()] = s
}

// Remove takes the server id out of the fleet.
func (l *Local) Remove(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.servers, id)
}

func (l *Local) loads() []voice.Load {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]voice.Load, 0, len(l.servers))
	for _, s := range l.servers {
		out = append(out, s.Load())
		if r, ok := s.LastReport(); ok {
			l.quality.observe(r)
		}
	}
	return out
}

func (l *Local) get(id string) *voice.Server {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.servers[id]
}

// Pick implements guild.VoiceAllocator.
func (l *Local) Pick(_ context.Context, region string) (guild.VoiceServer, error) {
	ld, err := pick(l.loads(), region, l.quality.poor)
	if err != nil {
		return guild.VoiceServer{}, err
	}
	return server(ld), nil
}

// Healthy implements guild.VoiceAllocator.
func (l *Local) Healthy(id string) bool {
	s := l.get(id)
	return s != nil && !s.Load().Draining
}

// Regions implements guild.VoiceAllocator.
func (l *Local) Regions() []guild.VoiceRegion { return regions(l.loads()) }

// Disconnect implements guild.VoiceControl.
func (l *Local) Disconnect(_ context.Context, id string, guildID, channelID, userID snowflake.ID) {
	if s := l.get(id); s != nil {
		s.Disconnect(guildID, channelID, userID)
	}
}

// SetServerVoiceState implements guild.VoiceControl.
func (l *Local) SetServerVoiceState(_ context.Context, id string, guildID, channelID, userID snowflake.ID, mute, deaf bool) {
	if s := l.get(id); s != nil {
		s.SetServerVoiceState(guildID, channelID, userID, mute, deaf)
	}
}

// NodeRegion implements guild.VoiceNearest.
func (l *Local) NodeRegion(node string) string { return nodeRegion(l.loads(), node) }
