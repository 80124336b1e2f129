package metrics_test

import (
	"testing"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/metrics"
)

func TestBreakerMetrics(t *testing.T) {
	m := metrics.New(domain.ResourceTypeRuntime)
	m.ObserveBreakerState("k8s", domain.BreakerOpen)
	m.ObserveBreakerState("k8s-eu", domain.BreakerHalfOpen)
	m.ObserveBreakerState("pool", domain.BreakerClosed)
	m.ObserveBreakerOpened("k8s")
	m.ObserveBreakerOpened("k8s")
	m.ObserveBrokerFailure("k8s", "throttled")
	m.ObserveBrokerFailure("k8s", "unavailable")
	m.ObserveBrokerFailure("k8s", "unavailable")

	families := scrape(t, m)
	checkSeries(t, families, "berth_broker_breaker_state", map[string]float64{
		"provisioner=k8s": 2, "provisioner=k8s-eu": 1, "provisioner=pool": 0,
	})
	checkSeries(t, families, "berth_broker_breaker_opens_total", map[string]float64{"provisioner=k8s": 2})
	checkSeries(t, families, "berth_broker_failures_total", map[string]float64{
		"class=throttled,provisioner=k8s": 1, "class=unavailable,provisioner=k8s": 2,
	})
}
