package external

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/environtest"
)

// fakeBroker is an in-process broker: each call's answer is its function's, and a call
// without one is answered as a well-behaved broker of type widget would.
type fakeBroker struct {
	info  func(w http.ResponseWriter)
	calls map[string]http.HandlerFunc

	mu       sync.Mutex
	requests []*http.Request
	bodies   []Request
}

func (f *fakeBroker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req Request
	if r.Method == http.MethodPost {
		data, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(data, &req)
		r.Body = io.NopCloser(bytes.NewReader(data))
	}
	f.mu.Lock()
	f.requests = append(f.requests, r)
	f.bodies = append(f.bodies, req)
	f.mu.Unlock()
	if r.URL.Path == PathInfo {
		if f.info != nil {
			f.info(w)
			return
		}
		writeJSON(w, http.StatusOK, Info{ProtocolVersion: ProtocolVersion, Types: []string{"widget"}, Capabilities: []string{CapabilityHibernate}})
		return
	}
	if fn, ok := f.calls[r.URL.Path]; ok {
		fn(w, r)
		return
	}
	resp := Response{Lease: req.Lease, Resource: req.Resource}
	if r.URL.Path == PathAwaitReady {
		ready := true
		resp.Ready, resp.Resource = &ready, nil
	}
	writeJSON(w, http.StatusOK, resp)
}

func (f *fakeBroker) last() (*http.Request, Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[len(f.requests)-1], f.bodies[len(f.bodies)-1]
}

// echo answers with the request's resource and lease, changed by change.
func echo(change func(*Response)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req Request
		_ = json.NewDecoder(r.Body).Decode(&req)
		resp := Response{Lease: req.Lease, Resource: req.Resource}
		change(&resp)
		writeJSON(w, http.StatusOK, resp)
	}
}

func answer(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}
}

// rows is an environ.ResourceGetter whose rows carry the lease tokens a test sets.
type rows map[string]domain.Resource

func (r rows) GetResource(_ context.Context, id string) (domain.Resource, error) {
	row, ok := r[id]
	if !ok {
		return domain.Resource{}, domain.ErrNotFound
	}
	return row, nil
}

// dial builds an external environ dialing handler over http on the loopback.
func dial(t *testing.T, handler http.Handler, deps environ.Deps, extra map[string]any) environ.Environ {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	spec := map[string]any{"types": []string{"widget"}, "url": srv.URL}
	for k, v := range extra {
		spec[k] = v
	}
	env, err := New("ext", jsonRaw(t, spec), deps)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.Close() })
	return env
}

func widget(id string, token int64) *environ.Resource {
	r := &environ.Resource{ID: id, Type: environtest.WidgetName}
	if token > 0 {
		r.Lease = &domain.Lease{Holder: "agent-1", Token: token}
	}
	return r
}

func widgetOpts() *environ.ResourceOptions {
	return &environ.ResourceOptions{Name: "w", Owner: "o", Args: map[string]any{"size": 1}, Generation: 1}
}

func TestGarbageCostsTheResourceAnUnavailableBrokerError(t *testing.T) {
	for _, tc := range []struct {
		name   string
		broker *fakeBroker
		want   string
	}{
		{"bad JSON", &fakeBroker{calls: map[string]http.HandlerFunc{PathReconcile: answer(200, `{"resource": {"id": `)}}, "not the protocol's JSON"},
		{"not JSON at all", &fakeBroker{calls: map[string]http.HandlerFunc{PathReconcile: answer(200, `<html>hello</html>`)}}, "not the protocol's JSON"},
		{"wrong protocol version", &fakeBroker{info: func(w http.ResponseWriter) {
			writeJSON(w, 200, Info{ProtocolVersion: 2, Types: []string{"widget"}})
		}}, "speaks protocol version 2"},
		{"unknown error class", &fakeBroker{calls: map[string]http.HandlerFunc{PathReconcile: answer(409, `{"error": {"class": "oops", "message": "m"}}`)}}, `error class "oops"`},
		{"4xx without error body", &fakeBroker{calls: map[string]http.HandlerFunc{PathReconcile: answer(404, `nope`)}}, "without the protocol's error body"},
		{"answer about another resource", &fakeBroker{calls: map[string]http.HandlerFunc{PathReconcile: echo(func(r *Response) { r.Resource = &Resource{ID: "other", Type: "widget"} })}}, `about resource "other"`},
		{"no resource", &fakeBroker{calls: map[string]http.HandlerFunc{PathReconcile: echo(func(r *Response) { r.Resource = nil })}}, `no "resource"`},
		{"another lease echoed", &fakeBroker{calls: map[string]http.HandlerFunc{PathReconcile: echo(func(r *Response) { r.Lease = &Lease{Holder: "agent-1", Token: 99} })}}, "echoes lease token 99"},
		{"no lease echoed", &fakeBroker{calls: map[string]http.HandlerFunc{PathReconcile: echo(func(r *Response) { r.Lease = nil })}}, "echoes lease none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := dial(t, tc.broker, environ.Deps{}, nil)
			_, err := env.Reconcile(context.Background(), widget("r1", 3), widgetOpts())
			u, unavailable := environ.IsUnavailable(err)
			var be *BrokerError
			if !unavailable || u.Class != environ.UnavailableServer || !errors.As(err, &be) {
				t.Fatalf("Reconcile: %v; want an unavailable *BrokerError of class %s", err, environ.UnavailableServer)
			}
			if !strings.Contains(err.Error(), "protocol violation") || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `provisioner "ext"`) {
				t.Errorf("error %q; want it to name the provisioner, say protocol violation and %q", err, tc.want)
			}
		})
	}
}

func TestErrorClassesMapToTheProvisionersClasses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		body  string
		code  int
		check func(t *testing.T, err error)
	}{
		{"permanent names its field", `{"error": {"class": "permanent", "message": "must be 1 to 10", "field": "args.size"}}`, 422, func(t *testing.T, err error) {
			var fe *domain.FieldError
			if !environ.IsPermanent(err) || !errors.As(err, &fe) || fe.Field != "args.size" {
				t.Errorf("%v: want permanent, naming args.size", err)
			}
		}},
		{"retryable", `{"error": {"class": "retryable", "message": "try again"}}`, 500, func(t *testing.T, err error) {
			_, unavailable := environ.IsUnavailable(err)
			if err == nil || environ.IsPermanent(err) || unavailable || errors.Is(err, domain.ErrNoCapacity) {
				t.Errorf("%v: want a plain retryable error", err)
			}
		}},
		{"unavailable with retry after", `{"error": {"class": "unavailable", "message": "db down", "retry_after_seconds": 7}}`, 503, func(t *testing.T, err error) {
			u, ok := environ.IsUnavailable(err)
			if !ok || u.RetryAfter != 7*time.Second {
				t.Errorf("%v: want unavailable, retry after 7s", err)
			}
		}},
		{"throttled", `{"error": {"class": "unavailable", "message": "slow down"}}`, 429, func(t *testing.T, err error) {
			if u, ok := environ.IsUnavailable(err); !ok || u.Class != environ.UnavailableThrottled {
				t.Errorf("%v: want unavailable, throttled", err)
			}
		}},
		{"no capacity", `{"error": {"class": "no_capacity", "message": "full"}}`, 409, func(t *testing.T, err error) {
			if !errors.Is(err, domain.ErrNoCapacity) {
				t.Errorf("%v: want ErrNoCapacity", err)
			}
		}},
		{"stale lease", `{"error": {"class": "stale_lease", "message": "token 4 < 5"}}`, 409, func(t *testing.T, err error) {
			if !errors.Is(err, domain.ErrLeaseHeld) {
				t.Errorf("%v: want ErrLeaseHeld", err)
			}
		}},
		{"5xx without body", `gateway trouble`, 502, func(t *testing.T, err error) {
			if _, ok := environ.IsUnavailable(err); !ok {
				t.Errorf("%v: want unavailable", err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := dial(t, &fakeBroker{calls: map[string]http.HandlerFunc{PathReconcile: answer(tc.code, tc.body)}}, environ.Deps{}, nil)
			_, err := env.Reconcile(context.Background(), widget("r1", 1), widgetOpts())
			tc.check(t, err)
		})
	}
}

func TestAHangingBrokerCostsATimeoutAndTheCallIsCancelled(t *testing.T) {
	cancelled := make(chan struct{})
	var deadline string
	broker := &fakeBroker{calls: map[string]http.HandlerFunc{PathReconcile: func(w http.ResponseWriter, r *http.Request) {
		deadline = r.Header.Get(HeaderDeadline)
		<-r.Context().Done()
		close(cancelled)
	}}}
	env := dial(t, broker, environ.Deps{}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	want, _ := ctx.Deadline()
	_, err := env.Reconcile(ctx, widget("r1", 1), widgetOpts())
	if u, ok := environ.IsUnavailable(err); !ok || u.Class != environ.UnavailableTimeout {
		t.Fatalf("Reconcile of a hanging broker: %v; want unavailable, timeout", err)
	}
	<-cancelled // the broker saw its request end
	got, perr := time.Parse(time.RFC3339Nano, deadline)
	if perr != nil || !got.Equal(want) {
		t.Errorf("%s = %q; want the context's deadline %s", HeaderDeadline, deadline, want.UTC().Format(time.RFC3339Nano))
	}
}

func TestTheCallTimeoutBoundsACallWithALaterDeadline(t *testing.T) {
	broker := &fakeBroker{calls: map[string]http.HandlerFunc{PathDeprovision: func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }}}
	env := dial(t, broker, environ.Deps{}, map[string]any{"call_timeout_seconds": 1})
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	err := env.Deprovision(ctx, widget("r1", 1))
	if u, ok := environ.IsUnavailable(err); !ok || u.Class != environ.UnavailableTimeout {
		t.Fatalf("Deprovision: %v; want unavailable, timeout", err)
	}
	req, _ := broker.last()
	got, _ := time.Parse(time.RFC3339Nano, req.Header.Get(HeaderDeadline))
	if got.After(time.Now().Add(time.Minute)) {
		t.Errorf("%s = %s: want the call timeout's, not the hour's", HeaderDeadline, got)
	}
}

func TestAnAnswerUnderAStaleLeaseIsNotKept(t *testing.T) {
	table := rows{"r1": {ID: "r1", LeaseToken: 8, LeaseHolder: "agent-2"}}
	env := dial(t, &fakeBroker{}, environ.Deps{Resources: table}, nil)
	_, err := env.Reconcile(context.Background(), widget("r1", 7), widgetOpts())
	var held *domain.LeaseHeldError
	if !errors.As(err, &held) || !strings.Contains(err.Error(), "lease is now token 8 of agent-2") {
		t.Fatalf("Reconcile under token 7 of a row at token 8: %v; want a *domain.LeaseHeldError naming token 8", err)
	}
	if _, err := env.Reconcile(context.Background(), widget("r1", 8), widgetOpts()); err != nil {
		t.Errorf("Reconcile under the row's token: %v", err)
	}
	if err := env.Deprovision(context.Background(), widget("gone", 3)); err != nil {
		t.Errorf("Deprovision of a resource whose row is gone: %v; want success", err)
	}
	if _, err := env.Reconcile(context.Background(), widget("gone", 3), widgetOpts()); !errors.Is(err, domain.ErrLeaseHeld) {
		t.Errorf("Reconcile of a resource whose row is gone: %v; want ErrLeaseHeld", err)
	}
}

func TestTheLeaseTravelsWithEachCall(t *testing.T) {
	broker := &fakeBroker{}
	env := dial(t, broker, environ.Deps{}, map[string]any{"hibernate": true})
	ctx := context.Background()
	r := widget("r1", 5)
	if _, err := env.Reconcile(ctx, r, widgetOpts()); err != nil {
		t.Fatal(err)
	}
	if _, body := broker.last(); body.Lease == nil || *body.Lease != (Lease{Holder: "agent-1", Token: 5}) {
		t.Errorf("reconcile carried lease %+v; want token 5 of agent-1", body.Lease)
	}
	if _, err := env.(environ.Hibernator).Hibernate(ctx, r, widgetOpts()); err != nil {
		t.Fatal(err)
	}
	if _, err := env.CheckResource(ctx, widget("r1", 0), widgetOpts()); err != nil {
		t.Fatal(err)
	}
	if _, body := broker.last(); body.Lease != nil {
		t.Errorf("a health check carried lease %+v; want none", body.Lease)
	}
}

func TestASecretInConfigIsRefused(t *testing.T) {
	broker := &fakeBroker{calls: map[string]http.HandlerFunc{PathReconcile: echo(func(r *Response) {
		r.Resource.Config = map[string]any{"host": "h", "auth": map[string]any{"password": "hunter2"}}
	})}}
	env := dial(t, broker, environ.Deps{}, nil)
	_, err := env.Reconcile(context.Background(), widget("r1", 1), widgetOpts())
	if !environ.IsPermanent(err) || !strings.Contains(err.Error(), `"auth.password"`) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("Reconcile: %v; want permanent, naming the key, not the secret", err)
	}
	ok := &fakeBroker{calls: map[string]http.HandlerFunc{PathReconcile: echo(func(r *Response) {
		r.Resource.Config = map[string]any{"password_file": "/run/secrets/x", "token_ref": "secret/x",
			"password_secret_name": "cache-auth", "password_secret_key": "password", "password_secret_namespace": "ns",
			"dsn": "clickhouse://default@ch.ns.svc:9000/default"}
	})}}
	if _, err := dial(t, ok, environ.Deps{}, nil).Reconcile(context.Background(), widget("r1", 1), widgetOpts()); err != nil {
		t.Errorf("Reconcile of a config with references only: %v", err)
	}
	// A DSN with a credential in it is a secret.
	for _, dsn := range []string{"clickhouse://default:hunter2@ch:9000/default", "postgres://u@db/x?password=hunter2", "host=db password=hunter2"} {
		withPassword := &fakeBroker{calls: map[string]http.HandlerFunc{PathReconcile: echo(func(r *Response) {
			r.Resource.Config = map[string]any{"dsn": dsn}
		})}}
		_, err = dial(t, withPassword, environ.Deps{}, nil).Reconcile(context.Background(), widget("r1", 1), widgetOpts())
		if !environ.IsPermanent(err) || !strings.Contains(err.Error(), `"dsn"`) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Reconcile of a config with a DSN holding a password: %v; want permanent, naming the key, not the secret", err)
		}
	}
	// A Secret's key is a reference only beside the Secret's name.
	unnamed := &fakeBroker{calls: map[string]http.HandlerFunc{PathReconcile: echo(func(r *Response) {
		r.Resource.Config = map[string]any{"bucket": "b", "aws_secret_key": "wJalrXUtnFEMI"}
	})}}
	_, err = dial(t, unnamed, environ.Deps{}, nil).Reconcile(context.Background(), widget("r1", 1), widgetOpts())
	if !environ.IsPermanent(err) || !strings.Contains(err.Error(), `"aws_secret_key"`) {
		t.Errorf("Reconcile of a config with aws_secret_key and no aws_secret_name: %v; want permanent, naming the key", err)
	}
}

func TestAwaitReadyAsksUntilReady(t *testing.T) {
	var mu sync.Mutex
	asks := 0
	broker := &fakeBroker{calls: map[string]http.HandlerFunc{PathAwaitReady: echo(func(r *Response) {
		mu.Lock()
		defer mu.Unlock()
		asks++
		ready := asks >= 3
		r.Ready, r.Resource, r.RetryAfterSeconds = &ready, nil, 0.05
	})}}
	env := dial(t, broker, environ.Deps{}, nil)
	if err := env.AwaitReady(context.Background(), widget("r1", 1)); err != nil {
		t.Fatal(err)
	}
	if asks != 3 {
		t.Errorf("asked %d times; want 3", asks)
	}
}

func TestTheTokenOfTokenFileIsSent(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	broker := &fakeBroker{}
	guarded := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		broker.ServeHTTP(w, r)
	})
	env := dial(t, guarded, environ.Deps{}, map[string]any{"token_file": tokenFile})
	if err := env.Check(context.Background()); err != nil {
		t.Fatalf("Check with the right token: %v", err)
	}
	if err := os.WriteFile(tokenFile, []byte("rotated"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := env.Check(context.Background())
	if _, ok := environ.IsUnavailable(err); !ok || strings.Contains(err.Error(), "rotated") {
		t.Errorf("Check with a token the broker refuses: %v; want unavailable, without the token", err)
	}
}

func TestABrokerThatIsNotListeningIsUnavailable(t *testing.T) {
	spec := jsonRaw(t, map[string]any{"types": []string{"widget"}, "socket": filepath.Join(t.TempDir(), "none.sock")})
	env, err := New("ext", spec, environ.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Close()
	_, err = env.Reconcile(context.Background(), widget("r1", 1), widgetOpts())
	if u, ok := environ.IsUnavailable(err); !ok || u.Class != environ.UnavailableConnection {
		t.Errorf("Reconcile: %v; want unavailable, connection", err)
	}
}

func TestAWidgetBrokerPassesVerifyAndEveryCallMatchesTheOpenAPIDocument(t *testing.T) {
	fake := &environtest.Hibernator{Environ: environtest.Environ{
		ReconcileFn: func(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error) {
			if err := environtest.Widget.Validate(opts.Args); err != nil {
				return nil, err
			}
			return &environ.Resource{ID: r.ID, Type: r.Type, State: map[string]any{"size": opts.Args["size"]}, Config: map[string]any{"url": "widget://" + r.ID}}, nil
		},
	}}
	v := newValidating(t, &Adapter{Env: fake, Types: []domain.ResourceType{environtest.WidgetName}})
	srv := httptest.NewServer(v)
	defer srv.Close()
	results, err := Verify(context.Background(), jsonRaw(t, map[string]any{"types": []string{"widget"}, "url": srv.URL}),
		VerifyConfig{Type: "widget", Args: map[string]any{"size": 2}}, environ.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	expectAllPass(t, results, "hibernate-and-wake")
	v.check()
}

func TestVerifyFailsABrokerThatBreaksTheContract(t *testing.T) {
	lax := &environtest.Environ{} // takes any args, fences nothing, carries out late calls
	broker := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(HeaderDeadline)
		var req Request
		if r.Method == http.MethodPost {
			_ = json.NewDecoder(r.Body).Decode(&req)
		}
		if r.URL.Path == PathInfo {
			writeJSON(w, 200, Info{ProtocolVersion: 1, Types: []string{"widget"}})
			return
		}
		if req.Resource == nil {
			writeJSON(w, 200, Response{})
			return
		}
		res, _ := lax.Reconcile(r.Context(), &environ.Resource{ID: req.Resource.ID, Type: environtest.WidgetName, State: req.Resource.State}, nil)
		ready := true
		writeJSON(w, 200, Response{Lease: req.Lease, Resource: wireResource(res), Ready: &ready})
	})
	srv := httptest.NewServer(broker)
	defer srv.Close()
	results, err := Verify(context.Background(), jsonRaw(t, map[string]any{"types": []string{"widget"}, "url": srv.URL}), VerifyConfig{Type: "widget"}, environ.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	failed := map[string]string{}
	for _, r := range results {
		if !r.Passed {
			failed[r.Name] = r.Detail
		}
	}
	for _, name := range []string{"stale-lease-refused", "invalid-args-permanent", "deadline-passed-refused"} {
		if _, ok := failed[name]; !ok {
			t.Errorf("check %s passed a broker that breaks it (results %+v)", name, results)
		}
	}
}

func expectAllPass(t *testing.T, results []CheckResult, mustRun ...string) {
	t.Helper()
	ran := map[string]bool{}
	for _, r := range results {
		ran[r.Name] = true
		if !r.Passed {
			t.Errorf("FAIL %s: %s", r.Name, r.Detail)
		}
	}
	for _, name := range append([]string{"reconcile-idempotent", "stale-lease-refused", "invalid-args-permanent", "cancellation", "deprovision-missing"}, mustRun...) {
		if !ran[name] {
			t.Errorf("check %s did not run (results %+v)", name, results)
		}
	}
}

func TestOnlyABrokerDeclaredToHibernateIsAHibernator(t *testing.T) {
	if _, ok := dial(t, &fakeBroker{}, environ.Deps{}, nil).(environ.Hibernator); ok {
		t.Error("a broker whose spec does not say hibernate is an environ.Hibernator: the provisioner would retry its hibernations forever")
	}
	noCapability := &fakeBroker{info: func(w http.ResponseWriter) {
		writeJSON(w, 200, Info{ProtocolVersion: ProtocolVersion, Types: []string{"widget"}})
	}}
	env := dial(t, noCapability, environ.Deps{}, map[string]any{"hibernate": true})
	_, err := env.(environ.Hibernator).Hibernate(context.Background(), widget("r1", 1), widgetOpts())
	if !environ.IsPermanent(err) || !strings.Contains(err.Error(), "does not list the hibernate capability") {
		t.Errorf("Hibernate through a broker without the capability: %v; want permanent, saying so", err)
	}
}

func TestTuningCallsAndRestartsKeepsTheFingerprint(t *testing.T) {
	build := func(extra string) string {
		t.Helper()
		set, err := newTestRegistry().NewSet([]byte(`{"b": {"type": "external", "spec": {"types": ["widget"], "socket": "/run/b.sock"`+extra+`}}}`), "", environ.Deps{})
		if err != nil {
			t.Fatal(err)
		}
		defer set.Close()
		fp, err := set.Fingerprint("b")
		if err != nil {
			t.Fatal(err)
		}
		return fp
	}
	plain := build("")
	if tuned := build(`, "call_timeout_seconds": 5`); tuned != plain {
		t.Errorf("a call timeout changed the fingerprint: %s, was %s", tuned, plain)
	}
	if other := build(`, "hibernate": true`); other == plain {
		t.Error("declaring hibernate kept the fingerprint")
	}
}

func newTestRegistry() *environ.Registry {
	r := environ.NewRegistry()
	r.Register(Type, New, environtest.Widget)
	return r
}

func TestSpecErrorsNameTheField(t *testing.T) {
	for _, tc := range []struct {
		spec  string
		field string
	}{
		{`{"command": ["b"]}`, "types"},
		{`{"types": ["Bad"], "command": ["b"]}`, "types[0]"},
		{`{"types": ["a"]}`, "spec"},
		{`{"types": ["a"], "command": ["b"], "socket": "/s"}`, "spec"},
		{`{"types": ["a"], "url": "http://broker.example.com"}`, "url"},
		{`{"types": ["a"], "socket": "/s", "token_file": "/t"}`, "token_file"},
		{`{"types": ["a"], "command": ["b"], "restart_min_seconds": 10, "restart_max_seconds": 5}`, "restart_max_seconds"},
		{`{"types": ["a"], "command": ["b"], "colour": 1}`, "colour"},
	} {
		_, err := ParseSpec(json.RawMessage(tc.spec))
		var fe *domain.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("ParseSpec(%s): %v; want a field error on %q", tc.spec, err, tc.field)
		}
	}
}

func TestDeclaredTypesAreServedAndChecksLeftToTheBroker(t *testing.T) {
	known := environ.NewRegistry()
	known.Register("fake", func(string, json.RawMessage, environ.Deps) (environ.Environ, error) { return nil, nil }, environtest.Widget)
	set := []byte(`{
		// comments are allowed, as in any set
		"folders": {"type": "external", "spec": {"types": ["folder", "widget"], "command": ["python3", "broker.py"]}},
		"pool": {"type": "static", "spec": {"types": ["ignored"]}},
	}`)
	defs := DeclaredTypes(set, known.Catalog())
	if len(defs) != 2 || defs[0].Name != "folder" || defs[1] != environtest.Widget {
		t.Fatalf("DeclaredTypes: %+v; want folder (new) and the known widget", defs)
	}
	if err := defs[0].Validate(map[string]any{"anything": 1}); err != nil {
		t.Errorf("a broker's type refused args the broker checks: %v", err)
	}
	if got := DeclaredTypes([]byte(`not json`), nil); got != nil {
		t.Errorf("DeclaredTypes of an unreadable set: %+v; want none", got)
	}
}
