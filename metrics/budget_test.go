package metrics_test

import (
	"testing"
	"time"

	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/metrics"
)

// *Metrics is what the environs record their shared budgets into.
var _ environ.BudgetObserver = (*metrics.Metrics)(nil)

func TestBudgetMetricsThroughTheHandler(t *testing.T) {
	m := metrics.New()
	m.ObserveBudgetWait("k8s", 1500*time.Millisecond)
	m.ObserveBudgetWait("k8s", 500*time.Millisecond)
	m.ObserveBudgetWait("other", 0)
	m.ObserveBudgetDraw("k8s")
	m.ObserveBudgetDraw("k8s")
	m.ObserveBudgetTokens("k8s", 3)
	m.ObserveBudgetTokens("k8s", 1)

	families := scrape(t, m)
	checkSeries(t, families, "berth_broker_budget_wait_seconds_total", map[string]float64{"provisioner=k8s": 2, "provisioner=other": 0})
	checkSeries(t, families, "berth_broker_budget_draws_total", map[string]float64{"provisioner=k8s": 2})
	checkSeries(t, families, "berth_broker_budget_tokens", map[string]float64{"provisioner=k8s": 1})
}
