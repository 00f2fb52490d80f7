// Package liverole joins the live-comment domain (runtime/domain/live) to a
// Concord process through package wiring: six roles, built by `concord
// dev` and by `concord serve --roles=...` from the same table.
//
//   - live-api serves the HTTP contract under /v1 (streams, comments,
//     moderation, reactions) on the chat listener and appends to the
//     event log;
//   - live-gateway serves GET /v1/streams/{id}/live (SSE) and reports
//     viewer counts;
//   - live-router consumes the event log (one owner per partition) and
//     feeds the recent cache and the relay;
//   - live-archiver consumes the event log into the comments store;
//   - live-relay is a node of the relay tree between the router and the
//     gateways (relay.go), used with --live-relay=tree (the default of
//     `concord dev`);
//   - live-moderation scores every comment with the classifier and takes
//     down those above the threshold (moderation.go).
//
// Each role builds the same way in both commands, on the backends the
// process opened once for its live roles and gives them (BackendsPort;
// OpenBackends, backends.go). In `concord dev` (every role in one
// process) they are embedded under <data-dir>/live: the memlog event log,
// the in-process recent cache, relay and board, and the Pebble comments
// store.
//
// In `concord serve` the roles run in whichever processes name them, on Kafka (--eventlog), Redis (--redis) and Cassandra
// (--store), with the registry (etcd) as the board that pushes rules,
// bans and viewer counts. A live-api without a live-gateway in its
// process forwards GET .../live to a live-gateway node of the registry,
// chosen by stream so one stream's viewers share a gateway.
package liverole

import (
	"context"
	"errors"
	"fmt"

	"github.com/concord-chat/concord/runtime/base/lifecycle"
	"github.com/concord-chat/concord/runtime/domain/live"
	"github.com/concord-chat/concord/runtime/domain/live/api"
	"github.com/concord-chat/concord/runtime/domain/live/archiver"
	"github.com/concord-chat/concord/runtime/domain/live/gateway"
	"github.com/concord-chat/concord/runtime/domain/live/recent"
	"github.com/concord-chat/concord/runtime/domain/live/router"
	"github.com/concord-chat/concord/runtime/services/presencerole"
	"github.com/concord-chat/concord/runtime/services/wiring"
)

// The --roles names of the live-comment roles.
const (
	NameAPI      = "live-api"
	NameGateway  = "live-gateway"
	NameRouter   = "live-router"
	NameArchiver = "live-archiver"
	// NameRelay is a node of the relay tree (relay.go).
	NameRelay = "live-relay"
	// NameModeration is the ML moderation consumer (moderation.go).
	NameModeration = "live-moderation"
)

// The live-comment roles.
var (
	// Gateway is the SSE gateway: GET /v1/streams/{id}/live.
	//
	// It uses the platform's relationships for the friends boost of a
	// sampled stream's rest tier: the process's own (wiring.Relationships,
	// `concord dev`), else in `concord serve` those of each user's owner
	// on the presence ring (presencerole.Relationships, over
	// PresenceNode.Friends). A viewer's friends are read once when the
	// viewer joins; a failed read loses only the boost.
	Gateway = wiring.Role{Name: NameGateway, Build: buildGateway, Needs: []string{BackendsPort.Name},
		Uses: []string{wiring.Relationships.Name}, Gives: []string{gatewayKey.Name}}
	// API is the Comment API: POST and GET under /v1.
	API = wiring.Role{Name: NameAPI, Build: buildAPI, Needs: []string{BackendsPort.Name}, Uses: []string{gatewayKey.Name}}
	// Router is the stream router.
	Router = wiring.Role{Name: NameRouter, Build: buildRouter, Needs: []string{BackendsPort.Name}}
	// Archiver writes every comment to the comments store.
	Archiver = wiring.Role{Name: NameArchiver, Build: buildArchiver, Needs: []string{BackendsPort.Name}}
	// Relay is a node of the relay tree the router publishes through and
	// the gateways subscribe through (--live-relay=tree).
	Relay = wiring.Role{Name: NameRelay, Build: buildRelay, Needs: []string{BackendsPort.Name}}
	// Moderation scores every comment with the classifier and takes down
	// those above the threshold.
	Moderation = wiring.Role{Name: NameModeration, Build: buildModeration, Needs: []string{BackendsPort.Name}}
)

// UsesRedis reports whether the role named name runs on --redis (the
// recent cache, the relay, the comment rate limits): every live role
// but the archiver.
func UsesRedis(name string) bool {
	return name == NameAPI || name == NameGateway || name == NameRouter
}

// Roles are the live-comment roles, in build order: the gateway before
// the API, which serves GET .../live with the gateway of its process.
var Roles = []wiring.Role{Relay, Gateway, API, Router, Archiver, Moderation}

// Patterns of the contract on the process's listener.
const (
	patternLive = "GET /v1/streams/{id}/live"
)

// apiPatterns are the paths the live-api serves. GET .../live is among
// them (it answers in one-process mode, or forwards); a live-gateway in
// the same process registers patternLive, which is more specific and so
// wins.
var apiPatterns = []string{"/v1/streams", "/v1/streams/", "/v1/users/@me/bans/"}

// backendsOf returns the process's live backends (BackendsPort).
func backendsOf(b *wiring.Builder) (Backends, error) {
	lb, ok := wiring.Lookup(b.Seams, BackendsPort)
	if !ok {
		return lb, errors.New("no live backends in the process")
	}
	return lb, nil
}

func topics(b *wiring.Builder) live.Topics { return live.TopicsFor(b.Config.Live.Prefix) }

func gatewayConfig(b *wiring.Builder) gateway.Config {
	l := b.Config.Live
	return gateway.Config{
		Name:           b.Config.Node,
		FlushInterval:  l.FlushInterval,
		PingInterval:   l.PingInterval,
		ReportInterval: l.ReportInterval,
		MaxPending:     l.MaxPending,
		MaxViewers:     l.MaxViewers,
		Logger:         b.Logger,
		Registerer:     b.Metrics,
	}
}

func routerConfig(b *wiring.Builder) router.Config {
	p := b.Config.Live.Prefix
	return router.Config{Topics: topics(b), Group: p + "router", ReactionsGroup: p + "reactions",
		Logger: b.Logger, Registerer: b.Metrics}
}

func archiverConfig(b *wiring.Builder) archiver.Config {
	return archiver.Config{Topics: topics(b), Group: b.Config.Live.Prefix + "archiver", Logger: b.Logger, Registerer: b.Metrics}
}

// gatewayKey is the process's SSE gateway, which the Comment API of the
// same process serves GET .../live with.
var gatewayKey = wiring.Key[*gateway.Gateway]{Name: "live-gateway"}

// buildGateway builds the SSE gateway and provides it to the Comment API
// of its process.
func buildGateway(ctx context.Context, b *wiring.Builder) error {
	if b.Auth == nil {
		return errors.New("live-gateway needs the process's auth")
	}
	bk, err := backendsOf(b)
	if err != nil {
		return err
	}
	deps := gateway.Deps{Relay: bk.Relay, Recent: bk.Cache, Store: bk.Store, Board: bk.Board, Verifier: b.Auth}
	if rel, ok := wiring.Lookup(b.Seams, wiring.Relationships); ok && rel != nil {
		deps.Friends = rel
	} else if b.Registry != nil {
		// `concord serve`: each user's relationships are held by the
		// user's owner on the presence ring; asked there over
		// PresenceNode.Friends (a failed read loses only the boost).
		rel, err := presencerole.Relationships(ctx, b)
		if err != nil {
			return fmt.Errorf("live gateway: relationships: %w", err)
		}
		deps.Friends = rel
	} else {
		b.Logger.Info("live-gateway: no relationships in this process; sampled streams show no friends' rest-tier comments")
	}
	gw, err := gateway.New(gatewayConfig(b), deps)
	if err != nil {
		return fmt.Errorf("live gateway: %w", err)
	}
	if err := addRelayFollower(b, bk); err != nil {
		return err
	}
	drain := func(ctx context.Context) { gw.Drain(ctx) }
	if err := b.Add(lifecycle.Part{Name: "gateway", Run: gw.Run, Drain: drain}); err != nil {
		return err
	}
	b.Handle(patternLive, gw)
	wiring.Provide(b.Seams, gatewayKey, gw)
	return nil
}

// buildAPI builds the Comment API. GET .../live is the process's gateway
// when it runs one (built before it), else forwarded to a live-gateway
// node of the registry.
func buildAPI(ctx context.Context, b *wiring.Builder) error {
	if b.Auth == nil || b.Store == nil || b.IDs == nil {
		return errors.New("live-api needs the process's auth, store and ids")
	}
	bk, err := backendsOf(b)
	if err != nil {
		return err
	}
	deps := api.Deps{Verifier: b.Auth, Users: b.Store, IDs: b.IDs, Log: bk.Log, Store: bk.Store,
		Recent: bk.Cache, Nonces: bk.Cache, Counters: bk.Counters, Board: bk.Board}
	if gw, ok := wiring.Lookup(b.Seams, gatewayKey); ok {
		deps.Live = gw
	} else if b.Registry != nil {
		// No live-gateway here: forward to one of the registry's, placed by
		// stream affinity.
		fw, err := newForwarder(b, bk.Board)
		if err != nil {
			return err
		}
		deps.Live = fw
		if err := b.Add(lifecycle.Part{Name: "gateway-watch", Run: fw.Run}); err != nil {
			return err
		}
	}
	a, err := api.New(api.Config{Topics: topics(b), Logger: b.Logger, Registerer: b.Metrics}, deps)
	if err != nil {
		return fmt.Errorf("live api: %w", err)
	}
	if err := b.Add(lifecycle.Part{Name: "api", Run: a.Run, Ready: synced(a.Synced(), "live-api: rules and bans not loaded from the board yet")}); err != nil {
		return err
	}
	for _, p := range apiPatterns {
		b.Handle(p, a)
	}
	b.HandleAdmin("GET /admin/live/streams", a.AdminStreams())
	return nil
}

// buildRouter builds the stream router. On the in-process recent cache
// (`concord dev`) it replays the comments topic from its start at every
// start, since that cache died with the last process (replay.go); on
// Redis it resumes its consumer group and is ready once caught up.
func buildRouter(ctx context.Context, b *wiring.Builder) error {
	bk, err := backendsOf(b)
	if err != nil {
		return err
	}
	lg, cache := bk.Log, bk.Cache
	rcfg := routerConfig(b)
	var consumer live.Consumer
	var ready func() error
	if _, inProcess := cache.(*recent.Mem); inProcess {
		rg, err := newReplayGroup(ctx, lg, rcfg.Group, rcfg.Topics.Comments)
		if err != nil {
			return err
		}
		consumer, ready = rg, rg.Ready
	} else {
		cu, err := newCaughtUp(ctx, lg, NameRouter, rcfg.Group, rcfg.Topics.Comments)
		if err != nil {
			return err
		}
		consumer, ready = cu, cu.Ready
	}
	rt, err := router.New(rcfg, router.Deps{Log: consumer, Recent: cache, Relay: bk.Relay, Board: bk.Board})
	if err != nil {
		return fmt.Errorf("live router: %w", err)
	}
	if err := addRelayFollower(b, bk); err != nil {
		return err
	}
	return b.Add(lifecycle.Part{Name: "router", Run: rt.Run, Ready: ready})
}

// buildArchiver builds the archiver, ready once caught up with the
// comments topic.
func buildArchiver(ctx context.Context, b *wiring.Builder) error {
	bk, err := backendsOf(b)
	if err != nil {
		return err
	}
	acfg := archiverConfig(b)
	cu, err := newCaughtUp(ctx, bk.Log, NameArchiver, acfg.Group, acfg.Topics.Comments)
	if err != nil {
		return err
	}
	if bk.Board == nil {
		// Only the routers' sampled marks on the board tell it a stream is
		// hot: without them a sampled stream's comments fill one store
		// partition per bucket instead of live.SampledShards.
		b.Logger.Warn("live-archiver without --registry: sampled streams' comments are written to one store partition per bucket (start it with the cluster's --registry to spread them)")
	}
	ar, err := archiver.New(acfg, archiver.Deps{Log: cu, Store: bk.Store, Board: bk.Board})
	if err != nil {
		return fmt.Errorf("live archiver: %w", err)
	}
	return b.Add(lifecycle.Part{Name: "archiver", Run: ar.Run, Ready: cu.Ready})
}

// synced is a Ready function: not ready until done is closed.
func synced(done <-chan struct{}, why string) func() error {
	return func() error {
		select {
		case <-done:
			return nil
		default:
			return errors.New(why)
		}
	}
}
