package voice

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// counterValue reads a counter's current value.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}

// forwardRateValue is the forwarded packets per second of the last load
// report period.
func (m *metrics) forwardRateValue() float64 {
	var d dto.Metric
	if err := m.forwardRate.Write(&d); err != nil {
		return 0
	}
	return d.GetGauge().GetValue()
}
