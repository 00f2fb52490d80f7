package transport

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/concord-chat/concord/runtime/adapters/store"
	"github.com/concord-chat/concord/runtime/adapters/tracing"
	"github.com/concord-chat/concord/runtime/base/snowflake"
	"github.com/concord-chat/concord/runtime/domain/event"
	"github.com/concord-chat/concord/runtime/domain/fanout"
	"github.com/concord-chat/concord/runtime/services/transport/transportpb"
)

// ServerConfig configures a node's gRPC server. Zero fields take the
// stated defaults.
type ServerConfig struct {
	// MaxRecvMsgSize bounds received messages (default DefaultMaxMsgSize).
	MaxRecvMsgSize int
	// MaxSendMsgSize bounds sent messages (default DefaultMaxMsgSize).
	MaxSendMsgSize int
	// Errors maps domain errors (guild.ErrUnknownGuild, ...) to gRPC codes;
	// it is consulted before the transport's own table. Clients should be
	// given the same table.
	Errors []ErrorCode
	// Logger receives one line per failed RPC and debug lines for the
	// rest (default: discard).
	Logger *slog.Logger
}

// Services are what a node serves; nil services are not registered.
type Services struct {
	// Node is this node's registry name. Required with Gateway: batches
	// for another node are rejected with ErrWrongNode.
	Node string
	// Gateway receives the batches of GatewayNode.Deliver.
	Gateway event.Sink
	// Sessions answers GatewayNode.UserSessions and SubscribeGuild, the
	// gateway node's part of the session directory (with Gateway; nil
	// answers Unimplemented).
	Sessions SessionBackend
	// Guild serves GuildNode.
	Guild GuildBackend
	// Data serves DataNode: the message port of a data node (its
	// coalescing dataservice.Service).
	Data store.Messages
	// ReadStates serves ReadStateNode: the read states of a read-state
	// node (its *readstate.Service).
	ReadStates ReadStateBackend
	// Presence serves PresenceNode: the presence node's presence.Service.
	Presence PresenceBackend
	// Relay serves RelayNode: a relay node forwards each request's
	// per-node batches to this sink (its GatewayClient).
	Relay event.Sink
	// SliceLease is how long the relay keeps the slices of an owner
	// process that has no Slice stream open to it (a guild node killed
	// outright sends no Drop); 0 takes DefaultSliceLease.
	SliceLease time.Duration
	// Owns reports whether this node owns a guild on its ring; when set,
	// GuildNode calls for other guilds fail with ErrNotOwner so the
	// caller retries on the owner. Nil accepts every guild.
	Owns func(guildID snowflake.ID) bool
}

// Server is a node's gRPC server.
type Server struct {
	grpc   *grpc.Server
	health *health.Server
	names  []string
}

// NewServer builds the server: logging and metrics interceptors,
// message-size limits, keepalive enforcement, the standard health service
// (reporting SERVING for "" and each registered service) and the services
// in svc.
func NewServer(cfg ServerConfig, svc Services) (*Server, error) {
	if svc.Gateway != nil && svc.Node == "" {
		return nil, fmt.Errorf("%w: a gateway server needs its node name", ErrInvalid)
	}
	if cfg.MaxRecvMsgSize <= 0 {
		cfg.MaxRecvMsgSize = DefaultMaxMsgSize
	}
	if cfg.MaxSendMsgSize <= 0 {
		cfg.MaxSendMsgSize = DefaultMaxMsgSize
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	errs := newErrorTable(cfg.Errors)
	obs := &observer{log: cfg.Logger}
	g := grpc.NewServer(
		grpc.MaxRecvMsgSize(cfg.MaxRecvMsgSize),
		grpc.MaxSendMsgSize(cfg.MaxSendMsgSize),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 10 * time.Second, Timeout: 5 * time.Second}),
		tracing.ServerOption(untraced),
		grpc.ChainUnaryInterceptor(obs.unary),
		grpc.ChainStreamInterceptor(obs.stream),
	)
	s := &Server{grpc: g, health: health.NewServer(), names: []string{""}}
	if svc.Gateway != nil {
		transportpb.RegisterGatewayNodeServer(g, &gatewayServer{node: svc.Node, sink: svc.Gateway, sessions: svc.Sessions, errs: errs})
		s.names = append(s.names, transportpb.GatewayNode_ServiceDesc.ServiceName)
	}
	if svc.Guild != nil {
		transportpb.RegisterGuildNodeServer(g, &guildServer{backend: svc.Guild, owns: svc.Owns, errs: errs})
		s.names = append(s.names, transportpb.GuildNode_ServiceDesc.ServiceName)
	}
	if svc.Data != nil {
		transportpb.RegisterDataNodeServer(g, &dataServer{backend: svc.Data, errs: errs})
		s.names = append(s.names, transportpb.DataNode_ServiceDesc.ServiceName)
	}
	if svc.ReadStates != nil {
		transportpb.RegisterReadStateNodeServer(g, &readStateServer{backend: svc.ReadStates, errs: errs})
		s.names = append(s.names, transportpb.ReadStateNode_ServiceDesc.ServiceName)
	}
	if svc.Presence != nil {
		transportpb.RegisterPresenceNodeServer(g, &presenceServer{backend: svc.Presence, errs: errs})
		s.names = append(s.names, transportpb.PresenceNode_ServiceDesc.ServiceName)
	}
	if svc.Relay != nil {
		lease := svc.SliceLease
		if lease <= 0 {
			lease = DefaultSliceLease
		}
		rs := &relayServer{sink: svc.Relay, errs: errs, slices: fanout.NewRelay(svc.Relay), lease: lease}
		sliceRelays.add(rs.slices)
		transportpb.RegisterRelayNodeServer(g, rs)
		s.names = append(s.names, transportpb.RelayNode_ServiceDesc.ServiceName)
	}
	healthpb.RegisterHealthServer(g, s.health)
	s.SetServing(true)
	return s, nil
}

// Serve accepts connections on lis until Stop or GracefulStop.
func (s *Server) Serve(lis net.Listener) error {
	if err := s.grpc.Serve(lis); err != nil {
		return fmt.Errorf("transport: serve: %w", err)
	}
	return nil
}

// SetServing sets the health status of every registered service; a
// draining node reports NOT_SERVING before it stops.
func (s *Server) SetServing(serving bool) {
	st := healthpb.HealthCheckResponse_SERVING
	if !serving {
		st = healthpb.HealthCheckResponse_NOT_SERVING
	}
	for _, n := range s.names {
		s.health.SetServingStatus(n, st)
	}
}

// GracefulStop reports NOT_SERVING, stops accepting and waits for
// running RPCs, including open Deliver streams, to finish.
func (s *Server) GracefulStop() {
	s.health.Shutdown()
	s.grpc.GracefulStop()
}

// Stop closes every connection at once.
func (s *Server) Stop() {
	s.health.Shutdown()
	s.grpc.Stop()
}

// observer is the logging and metrics interceptor pair.
type observer struct {
	log *slog.Logger
}

func (o *observer) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := h(ctx, req)
	o.done(ctx, info.FullMethod, start, err)
	return resp, err
}

func (o *observer) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	start := time.Now()
	err := h(srv, ss)
	o.done(ss.Context(), info.FullMethod, start, err)
	return err
}

func (o *observer) done(ctx context.Context, method string, start time.Time, err error) {
	d := time.Since(start)
	code := status.Code(err)
	serverHandled.WithLabelValues(method, code.String()).Inc()
	serverSeconds.WithLabelValues(method).Observe(d.Seconds())
	if err != nil {
		o.log.LogAttrs(ctx, slog.LevelWarn, "rpc failed", slog.String("method", method),
			slog.String("code", code.String()), slog.Duration("duration", d), slog.String("err", err.Error()))
		return
	}
	o.log.LogAttrs(ctx, slog.LevelDebug, "rpc done", slog.String("method", method), slog.Duration("duration", d))
}
