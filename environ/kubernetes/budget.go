package kubernetes

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"

	"github.com/juju/clock"
	"k8s.io/client-go/rest"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/internal/budget"
	"github.com/berth-dev/berth/environ/internal/specjson"
)

// BudgetSpec is a provisioner's shared rate budget: the API requests a second that every
// agent's instance of the provisioner makes together, client-go's own retries included. It
// is a token bucket in the agents' database (broker_budgets); each request waits for a
// token, cancellably, and a wait is never an error by itself.
type BudgetSpec struct {
	RequestsPerSecond float64 `json:"requests_per_second"`
	// Burst is the most requests made at once after a quiet spell; 0 or left out: the rate
	// rounded up.
	Burst int `json:"burst"`
}

// parseBudget decodes and checks the spec's budget object, filling in the burst's default.
func parseBudget(raw json.RawMessage) (*BudgetSpec, error) {
	var b BudgetSpec
	if err := specjson.DecodeObject("budget", "budget.", raw, []specjson.Field{
		{Name: "requests_per_second", Dst: &b.RequestsPerSecond},
		{Name: "burst", Dst: &b.Burst},
	}); err != nil {
		return nil, err
	}
	var keys map[string]json.RawMessage
	_ = json.Unmarshal(raw, &keys) // DecodeObject read it as an object
	_, given := keys["requests_per_second"]
	rate := b.RequestsPerSecond
	switch {
	case !given:
		return nil, &domain.FieldError{Field: "budget.requests_per_second", Msg: `is required: the API requests a second all agents make together, e.g. {"requests_per_second": 20}; leave "budget" out for no shared budget`}
	case math.IsInf(rate, 0) || rate <= 0:
		return nil, &domain.FieldError{Field: "budget.requests_per_second", Msg: fmt.Sprintf(`must be above 0, got %v: give the API requests a second all agents make together, or leave "budget" out for no shared budget`, rate)}
	case rate > maxBudgetRate:
		return nil, &domain.FieldError{Field: "budget.requests_per_second", Msg: fmt.Sprintf(`must be at most %d, got %v: leave "budget" out for no shared budget`, maxBudgetRate, rate)}
	case b.Burst < 0:
		return nil, &domain.FieldError{Field: "budget.burst", Msg: fmt.Sprintf("must not be negative, got %d; leave it out (or 0) for the rate rounded up, %d", b.Burst, int(math.Ceil(rate)))}
	case b.Burst > maxBudgetBurst:
		return nil, &domain.FieldError{Field: "budget.burst", Msg: fmt.Sprintf("must be at most %d, got %d", maxBudgetBurst, b.Burst)}
	}
	if b.Burst == 0 {
		b.Burst = int(math.Ceil(rate))
	}
	return &b, nil
}

// Bounds of a budget: well past what one API server takes, and within what the bucket's
// row holds exactly (a burst is an integer column).
const (
	maxBudgetRate  = 1_000_000
	maxBudgetBurst = 1_000_000
)

// budgetTransport makes every request through next wait for a token of limiter first. A
// request whose context ends while it waits fails with the context's error, as it would
// have in the transport; the wait is never an error by itself.
type budgetTransport struct {
	limiter *budget.Limiter
	next    http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t *budgetTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.limiter.Wait(req.Context()); err != nil {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper closes the body, even on an error
		}
		return nil, err
	}
	return t.next.RoundTrip(req)
}

// WrappedRoundTripper lets client-go's transport helpers see through the wrapper.
func (t *budgetTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

// newBudget is the limiter of spec's budget: nil without a budget, or without a store to
// share it through (where a set is only checked), in which case limitToBudget refuses to
// build the client.
func newBudget(name string, spec *Spec, deps environ.Deps, clk clock.Clock, logger *slog.Logger) (*budget.Limiter, error) {
	if spec.Budget == nil || deps.Budgets == nil {
		return nil, nil
	}
	cfg := budget.Config{
		Provisioner: name,
		Rate:        spec.Budget.RequestsPerSecond,
		Burst:       spec.Budget.Burst,
		Store:       deps.Budgets,
		Clock:       clk,
		Logger:      logger,
	}
	if deps.BudgetObserver != nil {
		cfg.Observer = deps.BudgetObserver
	}
	return budget.New(cfg)
}

// limitToBudget makes every request of the client cfg configures wait for a token of the
// provisioner's shared budget. The wait is the innermost wrapper, right around the network
// transport, whatever wraps the transport before or after this call: a wrapper that
// refuses a request (a breaker) spends no token, and one that retries spends one per try.
func (e *kubeEnviron) limitToBudget(cfg *rest.Config) error {
	switch {
	case e.spec.Budget == nil:
		return nil
	case e.budget == nil:
		return errors.New("the spec sets a budget, shared through the agents' database, but this provisioner was built without one (as check-config builds it): run it in the agent")
	}
	outer := cfg.WrapTransport
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		rt = &budgetTransport{limiter: e.budget, next: rt}
		if outer != nil {
			rt = outer(rt)
		}
		return rt
	}
	return nil
}

// BudgetReport is what /debug/engine shows of the provisioner's shared budget: nil
// without one.
func (e *kubeEnviron) BudgetReport() map[string]any {
	if e.budget == nil {
		return nil
	}
	return e.budget.Report()
}
