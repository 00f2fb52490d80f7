package main

import (
	"crypto/x509"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

func x509Pool(pem []byte) *x509.CertPool {
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(pem)
	return p
}

// voiceRegistry reads the SFU's forwarded-packets counter.
type voiceRegistry struct{ reg *prometheus.Registry }

func (v *voiceRegistry) r() prometheus.Registerer {
	if v.reg == nil {
		v.reg = prometheus.NewRegistry()
	}
	return v.reg
}

func (v *voiceRegistry) forwarded() float64 {
	mfs, _ := v.reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "concord_voice_packets_forwarded_total" {
			var sum float64
			for _, m := range mf.GetMetric() {
				sum += (&dto.Metric{Counter: m.Counter}).GetCounter().GetValue()
			}
			return sum
		}
	}
	return 0
}
