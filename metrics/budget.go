package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// budgetMetrics are the collectors of the provisioners' shared rate budgets (a
// provisioner's spec may set one: every agent draws its calls' tokens from one bucket in
// the database). Provisioners are labelled by their names in the set: the environs built
// from it are the only callers.
type budgetMetrics struct {
	waited *prometheus.CounterVec
	tokens *prometheus.GaugeVec
	draws  *prometheus.CounterVec
}

// newBudgetMetrics makes the budgets' collectors and registers them with registry.
func newBudgetMetrics(registry *prometheus.Registry) *budgetMetrics {
	b := &budgetMetrics{
		waited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_broker_budget_wait_seconds_total",
			Help: "Time this agent's calls to a provisioner's broker waited for a token of its shared rate budget, summed over the calls, by provisioner.",
		}, []string{"provisioner"}),
		tokens: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "berth_broker_budget_tokens",
			Help: "Tokens of a provisioner's shared rate budget this agent has drawn and not yet used, by provisioner.",
		}, []string{"provisioner"}),
		draws: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_broker_budget_draws_total",
			Help: "Draws of this agent from a provisioner's shared rate budget in the database (one statement each), by provisioner.",
		}, []string{"provisioner"}),
	}
	registry.MustRegister(b.waited, b.tokens, b.draws)
	return b
}

// ObserveBudgetWait adds d to the time the provisioner's calls waited for a token.
func (m *Metrics) ObserveBudgetWait(provisioner string, d time.Duration) {
	m.budgets.waited.WithLabelValues(provisioner).Add(d.Seconds())
}

// ObserveBudgetDraw counts a draw from the provisioner's shared budget.
func (m *Metrics) ObserveBudgetDraw(provisioner string) {
	m.budgets.draws.WithLabelValues(provisioner).Inc()
}

// ObserveBudgetTokens records the tokens of the provisioner's budget the agent holds.
func (m *Metrics) ObserveBudgetTokens(provisioner string, held int) {
	m.budgets.tokens.WithLabelValues(provisioner).Set(float64(held))
}
