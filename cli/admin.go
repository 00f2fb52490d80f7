package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"k8s.io/client-go/rest"

	"github.com/concord-chat/concord/operator/fleet"
)

// Admin reads live figures from the runtime.
type Admin interface {
	// Guild returns one guild's sample, as its guild node reports it.
	Guild(ctx context.Context, namespace, cluster, guildID string) (fleet.GuildSample, error)
	// Guilds returns every guild's sample.
	Guilds(ctx context.Context, namespace, cluster string) ([]fleet.GuildSample, error)
}

// ProxyAdmin reaches the API role's admin endpoint, port "admin" of the
// Service <cluster>-api, through the API server's service proxy:
//
//	GET /api/v1/namespaces/<ns>/services/http:<cluster>-api:admin/proxy/admin/guilds[/<id>]
type ProxyAdmin struct {
	// REST is a core/v1 REST client (clientset.CoreV1().RESTClient()).
	REST rest.Interface
}

func (p *ProxyAdmin) get(ctx context.Context, namespace, cluster, path string, out any) error {
	b, err := p.REST.Get().
		Namespace(namespace).
		Resource("services").
		Name("http:" + cluster + "-api:admin").
		SubResource("proxy").
		Suffix(path).
		DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("admin endpoint of %s-api (service proxy %s): %w", cluster, path, err)
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
