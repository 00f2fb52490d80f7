package dataservice

import (
	"github.com/prometheus/client_golang/prometheus"
)

// TopChannelsReported is how many channels a Service reports in
// concord_dataservice_top_channel_requests.
const TopChannelsReported = 10

var (
	topRequestsDesc = prometheus.NewDesc("concord_dataservice_top_channel_requests",
		"Requests of the busiest channels of a data instance (upper bounds, space-saving top-K).",
		[]string{"instance", "channel_id"}, nil)
	topCoalescedDesc = prometheus.NewDesc("concord_dataservice_top_channel_coalesced",
		"Requests of the busiest channels that joined a query in flight.",
		[]string{"instance", "channel_id"}, nil)
)

// Describe implements prometheus.Collector: a Service registered with a
// registry reports its top channels (at most TopChannelsReported, so the
// label set stays small).
func (s *Service) Describe(ch chan<- *prometheus.Desc) {
	ch <- topRequestsDesc
	ch <- topCoalescedDesc
}

// Collect implements prometheus.Collector.
func (s *Service) Collect(ch chan<- prometheus.Metric) {
	for _, c := range s.TopChannels(TopChannelsReported) {
		id := c.ChannelID.String()
		ch <- prometheus.MustNewConstMetric(topRequestsDesc, prometheus.GaugeValue, float64(c.Requests), s.cfg.Name, id)
		ch <- prometheus.MustNewConstMetric(topCoalescedDesc, prometheus.GaugeValue, float64(c.Coalesced), s.cfg.Name, id)
	}
}
