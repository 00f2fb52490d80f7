package main

import (
	"github.com/spf13/pflag"

	"github.com/concord-chat/concord/runtime/config"
)

// bindLiveFlags registers the live-comment roles' settings
// (config.Live); the roles run on --eventlog, --redis and --store.
func bindLiveFlags(fs *pflag.FlagSet, cfg *config.Live) {
	d := config.Default().Live
	strFlag(fs, &cfg.Prefix, "live-prefix", d.Prefix, "live comments: prefix of the event log topics (<prefix>comments, <prefix>reactions), consumer groups and Redis keys")
	intFlag(fs, &cfg.MaxViewers, "live-max-viewers", d.MaxViewers, "live comments: SSE connections one live gateway accepts before answering 503")
	intFlag(fs, &cfg.MaxPending, "live-max-pending", d.MaxPending, "live comments: bytes queued for one SSE viewer before it is cut (it resumes with Last-Event-ID)")
	durFlag(fs, &cfg.FlushInterval, "live-flush-interval", d.FlushInterval, "live comments: shortest time between two writes to one SSE viewer")
	durFlag(fs, &cfg.PingInterval, "live-ping-interval", d.PingInterval, "live comments: time between SSE ': ping' lines")
	strFlag(fs, &cfg.Relay, "live-relay", d.Relay, "live comments: how batches reach the live gateways: tree (the live-relay nodes' relay tree) or redis (pub/sub on --redis); empty: tree in concord dev, redis in serve")
	strFlag(fs, &cfg.RelayListen, "live-relay-listen", d.RelayListen, "live comments: listen address of a live-relay node's relay protocol (advertised with --advertise-host)")
	strFlag(fs, &cfg.Classifier, "live-classifier", d.Classifier, "live comments: the live-moderation role's classifier: linear (the Go model in the binary), off, or a KServe v2 server as http://host:port/MODEL")
	durFlag(fs, &cfg.ReportInterval, "live-report-interval", d.ReportInterval, "live comments: how often gateways report viewer counts and send viewers events")
}
