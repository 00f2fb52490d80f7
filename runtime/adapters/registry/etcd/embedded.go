package etcd

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// StartEmbedded runs a single-member etcd server storing its data in dir
// and serving clients on clientURL (default "http://127.0.0.1:0", a free
// loopback port). Its peer listener also takes a free loopback port and
// it logs nothing. It returns once the server is ready; endpoint is the
// URL clients dial and stop shuts the server down and waits for it; close
// the clients first, as stopping under connected clients waits seconds
// for them to go.
func StartEmbedded(ctx context.Context, dir string, clientURL string) (stop func(), endpoint string, err error) {
	if clientURL == "" {
		clientURL = "http://127.0.0.1:0"
	}
	cu, err := url.Parse(clientURL)
	if err != nil {
		return nil, "", fmt.Errorf("registry: embedded etcd client url: %w", err)
	}
	pu, _ := url.Parse("http://127.0.0.1:0")

	cfg := embed.NewConfig()
	cfg.Name = "concord"
	cfg.Dir = dir
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	cfg.AutoCompactionMode = "periodic"
	cfg.AutoCompactionRetention = "1h"

	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("registry: start embedded etcd: %w", err)
	}
	stop = func() {
		e.Close()
		<-e.Server.StopNotify()
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		stop()
		return nil, "", fmt.Errorf("registry: embedded etcd: %w", err)
	case <-ctx.Done():
		stop()
		return nil, "", fmt.Errorf("registry: embedded etcd not ready: %w", ctx.Err())
	case <-time.After(time.Minute):
		stop()
		return nil, "", fmt.Errorf("registry: embedded etcd not ready after a minute")
	}
	return stop, "http://" + e.Clients[0].Addr().String(), nil
}
