package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/berth-dev/berth/domain"
)

// breakerMetrics are the provisioners' circuit breakers as this agent sees them. Their
// provisioner label is a name of a provisioner set: breakers are written by agents only.
type breakerMetrics struct {
	state    *prometheus.GaugeVec
	opens    *prometheus.CounterVec
	failures *prometheus.CounterVec
}

func newBreakerMetrics(registry *prometheus.Registry) *breakerMetrics {
	b := &breakerMetrics{
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_broker_breaker_state",
			Help: "A provisioner's circuit breaker as this agent last read it: 0 closed, 1 half-open (one probe under way), 2 open (no agent calls the broker).",
		}, []string{"provisioner"}),
		opens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_broker_breaker_opens_total",
			Help: "Times a broker failure of this agent's opened the provisioner's circuit breaker.",
		}, []string{"provisioner"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_broker_failures_total",
			Help: "Broker calls of this agent that failed because the broker was unavailable, by class: throttled (429), unavailable (5xx), timeout, connection (refused or reset).",
		}, []string{"provisioner", "class"}),
	}
	registry.MustRegister(b.state, b.opens, b.failures)
	return b
}

// ObserveBreakerState records provisioner's breaker state.
func (m *Metrics) ObserveBreakerState(provisioner string, state domain.BreakerState) {
	v := 0.0
	switch state {
	case domain.BreakerHalfOpen:
		v = 1
	case domain.BreakerOpen:
		v = 2
	}
	m.breakers.state.WithLabelValues(provisioner).Set(v)
}

// ObserveBreakerOpened counts a breaker this agent opened.
func (m *Metrics) ObserveBreakerOpened(provisioner string) {
	m.breakers.opens.WithLabelValues(provisioner).Inc()
}

// ObserveBrokerFailure counts a broker failure of class (environ.UnavailableClass).
func (m *Metrics) ObserveBrokerFailure(provisioner, class string) {
	m.breakers.failures.WithLabelValues(provisioner, class).Inc()
}
