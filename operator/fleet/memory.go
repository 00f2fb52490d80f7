package fleet

import (
	"context"
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// Memory is an in-process fleet: a registry per cluster, pods' drain state,
// guild samples and voice loads, all set by the caller. Tests drive it to
// play the runtime's part; `concord-operator --fleet=memory` uses it for dry
// runs. It implements RegistryProvider, Drainer, GuildStats, VoiceLoads and
// LiveViewers.
type Memory struct {
	mu         sync.Mutex
	registries map[string]*MemoryRegistry
	pods       map[string]*memoryPod // key: namespace/name
	guilds     map[string][]GuildSample
	drainCalls map[string][]DrainRequest
	viewers    map[string]memoryViewers
}

type memoryViewers struct {
	gateways []GatewayViewers
	err      error
}

type memoryPod struct {
	state   DrainState
	load    VoiceLoad
	loadErr error
}

var (
	_ RegistryProvider = (*Memory)(nil)
	_ Drainer          = (*Memory)(nil)
	_ GuildStats       = (*Memory)(nil)
	_ VoiceLoads       = (*Memory)(nil)
	_ LiveViewers      = (*Memory)(nil)
)

// NewMemory returns an empty in-process fleet.
func NewMemory() *Memory {
	return &Memory{
		registries: map[string]*MemoryRegistry{},
		pods:       map[string]*memoryPod{},
		guilds:     map[string][]GuildSample{},
		drainCalls: map[string][]DrainRequest{},
		viewers:    map[string]memoryViewers{},
	}
}

// Registry returns the cluster's registry, creating it on first use.
func (m *Memory) Registry(_ context.Context, c ClusterKey) (Registry, error) {
	return m.RegistryFor(c.Namespace, c.Name), nil
}

// RegistryFor is Registry with the concrete type, for tests.
func (m *Memory) RegistryFor(namespace, name string) *MemoryRegistry {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := namespace + "/" + name
	r, ok := m.registries[k]
	if !ok {
		r = &MemoryRegistry{
			draining: map[string]bool{},
			pins:     map[string]string{},
			owners:   map[string]string{},
			relays:   map[string][]string{},
		}
		m.registries[k] = r
	}
	return r
}

// pod returns the record of p, creating it. Called with mu held.
func (m *Memory) pod(p *corev1.Pod) *memoryPod { return m.podAt(p.Namespace, p.Name) }

// podAt returns the record of pod namespace/name, creating it. Called with
// mu held.
func (m *Memory) podAt(namespace, name string) *memoryPod {
	k := namespace + "/" + name
	mp, ok := m.pods[k]
	if !ok {
		mp = &memoryPod{}
		m.pods[k] = mp
	}
	return mp
}

// Drain records the request and marks the pod draining; Done becomes true
// when its sessions reach zero (SetSessions).
func (m *Memory) Drain(_ context.Context, p *corev1.Pod, req DrainRequest) (DrainState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mp := m.pod(p)
	k := p.Namespace + "/" + p.Name
	if !mp.state.Draining {
		m.drainCalls[k] = append(m.drainCalls[k], req)
	}
	mp.state.Draining = true
	mp.state.Done = mp.state.Sessions == 0
	return mp.state, nil
}

// State reports the pod's drain state.
func (m *Memory) State(_ context.Context, p *corev1.Pod) (DrainState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mp := m.pod(p)
	mp.state.Done = mp.state.Draining && mp.state.Sessions == 0
	return mp.state, nil
}

// SetSessions sets the number of sessions (or calls) a pod reports.
func (m *Memory) SetSessions(namespace, pod string, n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.podAt(namespace, pod).state.Sessions = n
}

// DrainRequests returns the drain requests a pod received.
func (m *Memory) DrainRequests(namespace, pod string) []DrainRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.drainCalls[namespace+"/"+pod])
}

// SetGuildStats replaces the guild samples of a cluster.
func (m *Memory) SetGuildStats(namespace, name string, samples []GuildSample) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.guilds[namespace+"/"+name] = slices.Clone(samples)
}

// GuildStats returns the samples set with SetGuildStats.
func (m *Memory) GuildStats(_ context.Context, c ClusterKey) ([]GuildSample, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.guilds[c.Namespace+"/"+c.Name]), nil
}

// SetLiveViewers replaces the live gateways' viewers of a cluster (and
// clears an error set with SetLiveViewersError).
func (m *Memory) SetLiveViewers(namespace, name string, gateways []GatewayViewers) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.viewers[namespace+"/"+name] = memoryViewers{gateways: slices.Clone(gateways)}
}

// SetLiveViewersError makes LiveViewers of a cluster fail with err (the
// directory cannot be read); nil clears it.
func (m *Memory) SetLiveViewersError(namespace, name string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := m.viewers[namespace+"/"+name]
	v.err = err
	m.viewers[namespace+"/"+name] = v
}

// LiveViewers returns the viewers set with SetLiveViewers, or the error
// set with SetLiveViewersError.
func (m *Memory) LiveViewers(_ context.Context, c ClusterKey) ([]GatewayViewers, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v := m.viewers[c.Namespace+"/"+c.Name]
	if v.err != nil {
		return nil, v.err
	}
	return slices.Clone(v.gateways), nil
}

// SetVoiceLoad sets an SFU pod's load.
func (m *Memory) SetVoiceLoad(namespace, pod string, l VoiceLoad) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.podAt(namespace, pod).load = l
}

// SetVoiceLoadError makes VoiceLoad of an SFU pod fail with err (a
// missing or stale report); nil clears it.
func (m *Memory) SetVoiceLoadError(namespace, pod string, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.podAt(namespace, pod).loadErr = err
}

// VoiceLoad returns the load set with SetVoiceLoad, or the error set with
// SetVoiceLoadError.
func (m *Memory) VoiceLoad(_ context.Context, p *corev1.Pod) (VoiceLoad, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mp := m.pod(p)
	if mp.loadErr != nil {
		return VoiceLoad{}, mp.loadErr
	}
	return mp.load, nil
}

// MemoryRegistry is one cluster's in-process registry.
type MemoryRegistry struct {
	mu       sync.Mutex
	draining map[string]bool // role/pod
	pins     map[string]string
	owners   map[string]string
	relays   map[string][]string
	// FollowPins, when set, makes PinGuild and UnpinGuild move ownership at
	// once, as a healthy runtime eventually does.
	FollowPins bool
	// RingOwner is the owner a guild returns to on UnpinGuild with FollowPins.
	RingOwner string
}

var _ Registry = (*MemoryRegistry)(nil)

// MarkDraining records a draining mark.
func (r *MemoryRegistry) MarkDraining(_ context.Context, role, pod string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.draining[role+"/"+pod] = true
	return nil
}

// ClearDraining removes a draining mark.
func (r *MemoryRegistry) ClearDraining(_ context.Context, role, pod string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.draining, role+"/"+pod)
	return nil
}

// IsDraining reports a draining mark.
func (r *MemoryRegistry) IsDraining(role, pod string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.draining[role+"/"+pod]
}

// PinGuild records a pin.
func (r *MemoryRegistry) PinGuild(_ context.Context, guildID, node string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pins[guildID] = node
	if r.FollowPins {
		r.owners[guildID] = node
	}
	return nil
}

// UnpinGuild removes a pin.
func (r *MemoryRegistry) UnpinGuild(_ context.Context, guildID string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.pins, guildID)
	if r.FollowPins {
		r.owners[guildID] = r.RingOwner
	}
	return nil
}

// Pin returns a guild's pin, if any.
func (r *MemoryRegistry) Pin(guildID string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, ok := r.pins[guildID]
	return n, ok
}

// GuildOwner returns the owner set with SetGuildOwner (or by FollowPins).
func (r *MemoryRegistry) GuildOwner(_ context.Context, guildID string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o, ok := r.owners[guildID]
	if !ok || o == "" {
		return "", ErrNotFound
	}
	return o, nil
}

// SetGuildOwner plays the runtime: the guild's actor now runs on node.
func (r *MemoryRegistry) SetGuildOwner(guildID, node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.owners[guildID] = node
}

// SetRelays records a guild's relay endpoints.
func (r *MemoryRegistry) SetRelays(_ context.Context, guildID string, endpoints []string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(endpoints) == 0 {
		delete(r.relays, guildID)
		return nil
	}
	r.relays[guildID] = slices.Clone(endpoints)
	return nil
}

// Relays returns a guild's relay endpoints.
func (r *MemoryRegistry) Relays(guildID string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.relays[guildID])
}

// Pins returns a copy of every pin.
func (r *MemoryRegistry) Pins() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.pins)
}
