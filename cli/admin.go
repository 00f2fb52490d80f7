package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/concord-chat/concord/operator/fleet"
	"github.com/concord-chat/concord/operator/podadmin"
	"github.com/concord-chat/concord/runtime/edge/adminauth"
)

// Admin reads live figures from the runtime.
type Admin interface {
	// Guild returns one guild's sample, as its guild node reports it.
	Guild(ctx context.Context, namespace, cluster, guildID string) (fleet.GuildSample, error)
	// Guilds returns every guild's sample.
	Guilds(ctx context.Context, namespace, cluster string) ([]fleet.GuildSample, error)
	// LiveStreams returns the live streams with viewers, most watched
	// first, as the live-api role reports them.
	LiveStreams(ctx context.Context, namespace, cluster string, limit int) ([]LiveStream, error)
}

// LiveStream is one stream of `live streams` (the live-api's GET
// /admin/live/streams).
type LiveStream struct {
	StreamID string `json:"streamID"`
	Viewers  int64  `json:"viewers"`
	Gateways int    `json:"gateways"`
	Sampled  bool   `json:"sampled"`
}

// ProxyAdmin reaches the API role's admin endpoint, port "admin" of the
// Service <cluster>-api, through the API server's service proxy:
//
//	GET /api/v1/namespaces/<ns>/services/http:<cluster>-api:admin/proxy/admin/guilds[/<id>]
//
// with the cluster's admin token, derived from its server key secret, in
// the X-Concord-Admin-Token header (the API server consumes Authorization).
type ProxyAdmin struct {
	// REST is a core/v1 REST client (clientset.CoreV1().RESTClient()).
	REST rest.Interface
	// Reader reads the ConcordCluster and its server key secret; nil
	// sends no token.
	Reader client.Reader
}

func (p *ProxyAdmin) get(ctx context.Context, namespace, cluster, path string, out any) error {
	return p.getFrom(ctx, namespace, cluster, "api", path, nil, out)
}

// getFrom reads path from the admin port of the Service <cluster>-<role>,
// with the query parameters params.
func (p *ProxyAdmin) getFrom(ctx context.Context, namespace, cluster, role, path string, params map[string]string, out any) error {
	token := ""
	if p.Reader != nil {
		var err error
		if token, err = podadmin.ClusterToken(ctx, p.Reader, namespace, cluster); err != nil {
			return fmt.Errorf("admin token of %s: %w", cluster, err)
		}
	}
	req := p.REST.Get()
	for k, v := range params {
		req = req.Param(k, v)
	}
	b, err := req.
		SetHeader(adminauth.Header, token).
		Namespace(namespace).
		Resource("services").
		Name("http:" + cluster + "-" + role + ":admin").
		SubResource("proxy").
		Suffix(path).
		DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("admin endpoint of %s-%s (service proxy %s): %w", cluster, role, path, err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}

// Guild implements Admin.
func (p *ProxyAdmin) Guild(ctx context.Context, namespace, cluster, guildID string) (fleet.GuildSample, error) {
	if _, err := strconv.ParseUint(guildID, 10, 64); err != nil {
		return fleet.GuildSample{}, fmt.Errorf("guild id %q is not a snowflake", guildID)
	}
	var s fleet.GuildSample
	err := p.get(ctx, namespace, cluster, "admin/guilds/"+guildID, &s)
	return s, err
}

// Guilds implements Admin.
func (p *ProxyAdmin) Guilds(ctx context.Context, namespace, cluster string) ([]fleet.GuildSample, error) {
	var s []fleet.GuildSample
	err := p.get(ctx, namespace, cluster, "admin/guilds", &s)
	return s, err
}

// LiveStreams implements Admin: GET /admin/live/streams of the live-api
// Service.
func (p *ProxyAdmin) LiveStreams(ctx context.Context, namespace, cluster string, limit int) ([]LiveStream, error) {
	var s []LiveStream
	err := p.getFrom(ctx, namespace, cluster, "live-api", "admin/live/streams", map[string]string{"limit": strconv.Itoa(limit)}, &s)
	return s, err
}
