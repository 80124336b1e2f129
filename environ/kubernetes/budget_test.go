package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

func TestParseBudget(t *testing.T) {
	base := `"host": "http://*.rt.example", "namespace": "ns", "image": "img"`
	for _, tc := range []struct {
		name, budget string
		want         *BudgetSpec
	}{
		{"absent", ``, nil},
		{"null", `, "budget": null`, nil},
		{"rate and burst", `, "budget": {"requests_per_second": 20, "burst": 40}`, &BudgetSpec{RequestsPerSecond: 20, Burst: 40}},
		{"burst left out: the rate rounded up", `, "budget": {"requests_per_second": 2.5}`, &BudgetSpec{RequestsPerSecond: 2.5, Burst: 3}},
		{"burst 0: the rate rounded up", `, "budget": {"requests_per_second": 20, "burst": 0}`, &BudgetSpec{RequestsPerSecond: 20, Burst: 20}},
		{"below one a second", `, "budget": {"requests_per_second": 0.2}`, &BudgetSpec{RequestsPerSecond: 0.2, Burst: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := ParseSpec(json.RawMessage(`{` + base + tc.budget + `}`))
			if err != nil {
				t.Fatal(err)
			}
			if (spec.Budget == nil) != (tc.want == nil) || (tc.want != nil && *spec.Budget != *tc.want) {
				t.Errorf("budget %+v, want %+v", spec.Budget, tc.want)
			}
			if spec.QPS != DefaultQPS || spec.Burst != DefaultBurst {
				t.Errorf("qps %v, burst %d: the client's own limits must keep their defaults", spec.QPS, spec.Burst)
			}
		})
	}
	for _, tc := range []struct {
		name, budget, field, want string
	}{
		{"not an object", `20`, "budget", "must be a JSON object"},
		{"unknown field", `{"requestsPerSecond": 20}`, "budget.requestsPerSecond", "unknown field; known: requests_per_second, burst"},
		{"rate missing", `{"burst": 40}`, "budget.requests_per_second", `is required: the API requests a second all agents make together, e.g. {"requests_per_second": 20}; leave "budget" out for no shared budget`},
		{"zero rate", `{"requests_per_second": 0}`, "budget.requests_per_second", `must be above 0, got 0: give the API requests a second all agents make together, or leave "budget" out`},
		{"negative rate", `{"requests_per_second": -5}`, "budget.requests_per_second", "must be above 0, got -5"},
		{"rate not a number", `{"requests_per_second": "20/s"}`, "budget.requests_per_second", "must be a number"},
		{"rate past the bound", `{"requests_per_second": 2e6}`, "budget.requests_per_second", "must be at most 1000000"},
		{"negative burst", `{"requests_per_second": 20, "burst": -1}`, "budget.burst", "must not be negative, got -1; leave it out (or 0) for the rate rounded up, 20"},
		{"fractional burst", `{"requests_per_second": 20, "burst": 1.5}`, "budget.burst", "must be a whole number"},
		{"burst past the bound", `{"requests_per_second": 20, "burst": 2000000}`, "budget.burst", "must be at most 1000000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSpec(json.RawMessage(`{` + base + `, "budget": ` + tc.budget + `}`))
			var fe *domain.FieldError
			if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseSpec = %v, want a field error on %s saying %q", err, tc.field, tc.want)
			}
		})
	}
}

// A budget shapes no resource: changing it leaves the resources' fingerprint as it was.
func TestBudgetIsNotInTheResourcesFingerprint(t *testing.T) {
	base := `"host": "http://*.rt.example", "namespace": "ns", "image": "img"`
	var shapes []string
	for _, extra := range []string{``, `, "budget": {"requests_per_second": 20}`, `, "budget": {"requests_per_second": 5, "burst": 50}`} {
		e, err := New("k8s", json.RawMessage(`{`+base+extra+`}`), environ.Deps{Budgets: grantAll()})
		if err != nil {
			t.Fatal(err)
		}
		shape, err := json.Marshal(e.(environ.ResourceSpecReporter).ResourceSpec())
		if err != nil {
			t.Fatal(err)
		}
		shapes = append(shapes, string(shape))
	}
	if shapes[0] != shapes[1] || shapes[0] != shapes[2] {
		t.Errorf("resource specs differ with the budget:\n%s", strings.Join(shapes, "\n"))
	}
}

// budgetStore is a BudgetStore made of a function, counting its draws.
type budgetStore struct {
	mu    sync.Mutex
	draws []domain.BudgetDraw
	grant func(domain.BudgetDraw) domain.BudgetGrant
}

func (s *budgetStore) DrawBudget(_ context.Context, draw domain.BudgetDraw) (domain.BudgetGrant, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.draws = append(s.draws, draw)
	return s.grant(draw), nil
}

func (s *budgetStore) granted() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, d := range s.draws {
		n += s.grant(d).Granted
	}
	return n
}

func grantAll() *budgetStore {
	return &budgetStore{grant: func(d domain.BudgetDraw) domain.BudgetGrant { return domain.BudgetGrant{Granted: d.Want} }}
}

// apiServer answers every request 404 and counts them.
func apiServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &requests
}

func budgetSpec(t *testing.T, server, budget string) json.RawMessage {
	path := writeKubeconfig(t, t.TempDir(), server, nil, nil)
	return json.RawMessage(strings.TrimSuffix(kubeconfigSpec(path), "}") + `, "budget": ` + budget + `}`)
}

// Every API request of a provisioner with a budget takes a token of it first, and one that
// gets none waits until its context ends, without reaching the API server.
func TestEveryRequestWaitsForABudgetToken(t *testing.T) {
	srv, requests := apiServer(t)
	store := grantAll()
	e, err := New("k8s", budgetSpec(t, srv.URL, `{"requests_per_second": 20, "burst": 40}`), environ.Deps{Budgets: store})
	if err != nil {
		t.Fatal(err)
	}
	cs, err := e.(*kubeEnviron).client()
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := cs.CoreV1().Namespaces().Get(t.Context(), "ns", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("get: %v; want the server's not found", err)
		}
	}
	if got, granted := requests.Load(), store.granted(); got != 5 || granted != 5 {
		t.Fatalf("%d requests reached the server with %d tokens granted; want 5 and 5", got, granted)
	}
	if d := store.draws[0]; d.Provisioner != "k8s" || d.Rate != 20 || d.Burst != 40 {
		t.Errorf("draw %+v; want the provisioner's name and budget", d)
	}
	report := e.(*kubeEnviron).BudgetReport()
	if report["tokens-granted"] != int64(5) || report["requests-per-second"] != 20.0 {
		t.Errorf("budget report %v", report)
	}

	empty := &budgetStore{grant: func(domain.BudgetDraw) domain.BudgetGrant { return domain.BudgetGrant{} }}
	e, err = New("k8s", budgetSpec(t, srv.URL, `{"requests_per_second": 20}`), environ.Deps{Budgets: empty})
	if err != nil {
		t.Fatal(err)
	}
	if cs, err = e.(*kubeEnviron).client(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	if _, err := cs.CoreV1().Namespaces().Get(ctx, "ns", metav1.GetOptions{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("get with no token to be had: %v; want the context's deadline", err)
	}
	if got := requests.Load(); got != 5 {
		t.Errorf("%d requests reached the server; want none more without a token", got-5)
	}
}

// A provisioner built without the agents' database (as check-config builds it) cannot
// share its budget: its first use says so instead of going past it.
func TestBudgetWithoutAStoreRefusesTheClient(t *testing.T) {
	srv, requests := apiServer(t)
	e, err := New("k8s", budgetSpec(t, srv.URL, `{"requests_per_second": 20}`), environ.Deps{})
	if err != nil {
		t.Fatalf("New without a store (check-config): %v", err)
	}
	if _, err := e.(*kubeEnviron).client(); err == nil || !strings.Contains(err.Error(), "sets a budget") {
		t.Fatalf("client without a budget store: %v; want an error saying the budget cannot be shared", err)
	}
	if requests.Load() != 0 {
		t.Error("a request reached the server")
	}
}

// The budget's wait is the innermost wrapper of the transport, whichever wrappers come
// before or after it: a wrapper that refuses a request spends no token.
func TestBudgetIsTheInnermostWrapper(t *testing.T) {
	srv, requests := apiServer(t)
	store := grantAll()
	e, err := New("k8s", budgetSpec(t, srv.URL, `{"requests_per_second": 20}`), environ.Deps{Budgets: store})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := restConfig(e.(*kubeEnviron).spec)
	if err != nil {
		t.Fatal(err)
	}
	refuse := func(http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, errors.New("breaker open") })
	}
	cfg.Wrap(refuse)
	if err := e.(*kubeEnviron).limitToBudget(cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return rt })
	rt := cfg.WrapTransport(http.DefaultTransport)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
	if _, err := rt.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "breaker open") {
		t.Fatalf("round trip: %v; want the outer wrapper's refusal", err)
	}
	if len(store.draws) != 0 || requests.Load() != 0 {
		t.Errorf("a refused request drew %d times and reached the server %d times; want neither", len(store.draws), requests.Load())
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
