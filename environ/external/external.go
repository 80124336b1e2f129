package external

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/juju/clock"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// Type is the provisioner type of an external broker in a provisioner set.
const Type = "external"

// startupWait bounds how long a call waits for a broker the agent just started to listen.
const startupWait = 10 * time.Second

// Polling of await-ready: how long the agent waits before asking again when the broker gives
// no retry_after_seconds, and the bounds of what it accepts.
const (
	defaultReadyPoll = time.Second
	minReadyPoll     = 50 * time.Millisecond
	maxReadyPoll     = 30 * time.Second
)

// New is the external environ's environ.Initializer: it parses spec and prepares to start
// the broker (spec "command": at the first call, so that a set built only to be checked
// runs nothing) or to dial it (spec "socket" or "url"). It does not wait for the broker: a
// broker that is down costs its resources a status, never the agent's start.
func New(name string, spec json.RawMessage, deps environ.Deps) (environ.Environ, error) {
	if name == "" {
		return nil, errors.New("external provisioner needs a name")
	}
	parsed, err := ParseSpec(spec)
	if err != nil {
		return nil, err
	}
	logger := deps.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	clk := deps.Clock
	if clk == nil {
		clk = clock.WallClock
	}
	e := &externalEnviron{name: name, spec: parsed, resources: deps.Resources, clock: clk, logger: logger}
	socket := ""
	if len(parsed.Command) > 0 {
		e.supervisor, err = newSupervisor(parsed.Command, parsed.Dir,
			time.Duration(parsed.RestartMinSeconds)*time.Second, time.Duration(parsed.RestartMaxSeconds)*time.Second, clk, logger)
		if err != nil {
			return nil, err
		}
		socket = e.supervisor.socket
	}
	e.client, err = newClient(name, parsed, socket, clk.Now)
	if err != nil {
		e.Close()
		return nil, err
	}
	if parsed.Hibernate {
		return hibernatingEnviron{e}, nil
	}
	return e, nil
}

// hibernatingEnviron is the environ of a broker whose spec says it hibernates.
type hibernatingEnviron struct{ *externalEnviron }

var _ environ.Hibernator = hibernatingEnviron{}

// Hibernate implements environ.Hibernator.
func (h hibernatingEnviron) Hibernate(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error) {
	return h.hibernate(ctx, r, opts)
}

// asExternal is the *externalEnviron New built, whichever type it returned.
func asExternal(env environ.Environ) *externalEnviron {
	if h, ok := env.(hibernatingEnviron); ok {
		return h.externalEnviron
	}
	return env.(*externalEnviron)
}

// externalEnviron is an environ.Environ whose broker runs in another process.
type externalEnviron struct {
	name       string
	spec       *Spec
	client     *client
	supervisor *supervisor // nil for a broker the agent dials
	resources  environ.ResourceGetter
	clock      clock.Clock
	logger     *slog.Logger

	mu sync.Mutex
	// info is the broker's handshake answer, valid for the process start infoStarts (a
	// started broker) or until a call finds the broker unreachable (a dialed one).
	info       *Info
	infoStarts int
}

var (
	_ environ.CapacityReporter     = (*externalEnviron)(nil)
	_ environ.ResourceSpecReporter = (*externalEnviron)(nil)
)

// ResourceSpec implements environ.ResourceSpecReporter: resources are shaped by the broker
// and what it serves, not by how long a call may take or how restarts back off, so tuning
// those moves no resource to a new generation.
func (e *externalEnviron) ResourceSpec() any {
	return map[string]any{"types": e.spec.Types, "hibernate": e.spec.Hibernate,
		"command": e.spec.Command, "dir": e.spec.Dir, "socket": e.spec.Socket, "url": e.spec.URL}
}

// Summary says in a line which broker serves what (berth check-config).
func (e *externalEnviron) Summary() string {
	var broker string
	switch {
	case len(e.spec.Command) > 0:
		broker = fmt.Sprintf("broker %q, started by the agent", strings.Join(e.spec.Command, " "))
	case e.spec.Socket != "":
		broker = "broker on socket " + e.spec.Socket
	default:
		broker = "broker at " + e.spec.URL
	}
	return fmt.Sprintf("%s; serves %s; call timeout %ds", broker, strings.Join(e.spec.Types, ", "), e.spec.CallTimeoutSeconds)
}

// Type implements environ.Environ.
func (e *externalEnviron) Type() string { return Type }

// Supports implements environ.Environ: the types the spec declares.
func (e *externalEnviron) Supports(t domain.ResourceType) bool {
	return slices.Contains(e.spec.Types, string(t))
}

// Reconcile implements environ.Environ.
func (e *externalEnviron) Reconcile(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error) {
	resp, err := e.call(ctx, "reconcile", PathReconcile, r, &Request{Resource: wireResource(r), Options: wireOptions(opts), Lease: wireLease(r)})
	if err != nil {
		return nil, err
	}
	return e.resourceOf(ctx, "reconcile", r, resp)
}

// AwaitReady implements environ.Environ: it asks the broker until it answers ready, waiting
// between asks as long as the broker says (about a second when it does not).
func (e *externalEnviron) AwaitReady(ctx context.Context, r *environ.Resource) error {
	for {
		resp, err := e.call(ctx, "await-ready", PathAwaitReady, r, &Request{Resource: wireResource(r), Lease: wireLease(r)})
		if err != nil {
			return err
		}
		if resp.Ready == nil {
			return e.client.garbage("await-ready", `the answer has no "ready"`)
		}
		if *resp.Ready {
			return nil
		}
		wait := defaultReadyPoll
		if resp.RetryAfterSeconds > 0 {
			wait = min(max(time.Duration(resp.RetryAfterSeconds*float64(time.Second)), minReadyPoll), maxReadyPoll)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s %s not ready yet: %w", r.Type, r.ID, ctx.Err())
		case <-e.clock.After(wait):
		}
	}
}

// Deprovision implements environ.Environ.
func (e *externalEnviron) Deprovision(ctx context.Context, r *environ.Resource) error {
	_, err := e.call(ctx, "deprovision", PathDeprovision, r, &Request{Resource: wireResource(r), Lease: wireLease(r)})
	return err
}

// hibernate is the hibernate call, for a broker with the hibernate capability.
func (e *externalEnviron) hibernate(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error) {
	info, err := e.handshake(ctx)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(info.Capabilities, CapabilityHibernate) {
		return nil, environ.Permanent(&BrokerError{Provisioner: e.name, Call: "hibernate", Class: ClassNotSupported, Msg: "the broker does not list the hibernate capability: wake the resource (it was never stopped) or use a broker that hibernates"})
	}
	resp, err := e.call(ctx, "hibernate", PathHibernate, r, &Request{Resource: wireResource(r), Options: wireOptions(opts), Lease: wireLease(r)})
	if err != nil {
		return nil, err
	}
	return e.resourceOf(ctx, "hibernate", r, resp)
}

// Check implements environ.Environ: the broker process (when the agent runs it), the
// handshake and the broker's own check.
func (e *externalEnviron) Check(ctx context.Context) error {
	if e.supervisor != nil {
		e.supervisor.Start()
		if down := e.processDown(); down != "" {
			return fmt.Errorf("provisioner %q: %s", e.name, down)
		}
	}
	var resp Response
	if err := e.do(ctx, "check", PathCheck, &Request{}, &resp); err != nil {
		return err
	}
	return nil
}

// CheckResource implements environ.Environ.
func (e *externalEnviron) CheckResource(ctx context.Context, r *environ.Resource, opts *environ.ResourceOptions) (*environ.Resource, error) {
	resp, err := e.call(ctx, "check-resource", PathCheckResource, r, &Request{Resource: wireResource(r), Options: wireOptions(opts), Lease: wireLease(r)})
	if err != nil {
		return nil, err
	}
	return e.resourceOf(ctx, "check-resource", r, resp)
}

// Capacity implements environ.CapacityReporter for a broker with the capacity capability.
func (e *externalEnviron) Capacity(ctx context.Context) (environ.Capacity, error) {
	info, err := e.handshake(ctx)
	if err != nil {
		return environ.Capacity{}, err
	}
	if !slices.Contains(info.Capabilities, CapabilityCapacity) {
		return environ.Capacity{}, environ.Permanent(&BrokerError{Provisioner: e.name, Call: "capacity", Class: ClassNotSupported, Msg: "the broker does not list the capacity capability"})
	}
	var answer CapacityAnswer
	if err := e.client.do(ctx, "capacity", PathCapacity, nil, &answer); err != nil {
		e.forgetOnUnreachable(err)
		return environ.Capacity{}, err
	}
	c := environ.Capacity{Unit: answer.Unit, Total: answer.Total, Used: answer.Used}
	for _, h := range answer.Hosts {
		c.Hosts = append(c.Hosts, environ.HostCapacity{Host: h.Host, Total: h.Total, Used: h.Used, Down: h.Down})
	}
	return c, nil
}

// Close implements environ.Environ: it stops the broker the agent started.
func (e *externalEnviron) Close() error {
	if e.client != nil {
		e.client.http.CloseIdleConnections()
	}
	if e.supervisor == nil {
		return nil
	}
	e.supervisor.Kill()
	if err := e.supervisor.Wait(); err != nil {
		return fmt.Errorf("stop the broker of provisioner %q: %w", e.name, err)
	}
	return nil
}

// BrokerReport is what /debug/engine shows of the broker: its process (when the agent runs
// it) and the handshake's answer.
func (e *externalEnviron) BrokerReport() map[string]any {
	report := map[string]any{}
	if e.supervisor != nil {
		report["process"] = e.supervisor.Report()
	}
	e.mu.Lock()
	if e.info != nil {
		report["protocol_version"] = e.info.ProtocolVersion
		report["types"] = e.info.Types
		report["capabilities"] = e.info.Capabilities
	}
	e.mu.Unlock()
	return report
}

// call makes a call about resource r under its lease: the handshake first, then the call,
// then the lease's checks on the answer.
func (e *externalEnviron) call(ctx context.Context, call, path string, r *environ.Resource, req *Request) (*Response, error) {
	var resp Response
	if err := e.do(ctx, call, path, req, &resp); err != nil {
		return nil, err
	}
	if err := e.checkLease(ctx, call, r, req.Lease, resp.Lease); err != nil {
		return nil, err
	}
	return &resp, nil
}

// do makes a call once the handshake is done.
func (e *externalEnviron) do(ctx context.Context, call, path string, req *Request, resp *Response) error {
	if _, err := e.handshake(ctx); err != nil {
		return err
	}
	err := e.client.do(ctx, call, path, req, resp)
	e.forgetOnUnreachable(err)
	return e.explainUnreachable(err)
}

// explainUnreachable adds to a call that reached no broker why its process is down, when
// the agent runs it and knows.
func (e *externalEnviron) explainUnreachable(err error) error {
	var be *BrokerError
	if unreachable(err) && errors.As(err, &be) {
		if down := e.processDown(); down != "" {
			be.Msg += "; " + down
		}
	}
	return err
}

// processDown says why the broker the agent starts is not running ("" when it runs, or
// the agent does not start it).
func (e *externalEnviron) processDown() string {
	if e.supervisor == nil {
		return ""
	}
	st := e.supervisor.Status()
	if st.Running || st.LastExit == "" {
		return ""
	}
	return fmt.Sprintf("broker process is down (%s; %d restarts): next start at %s", st.LastExit, st.Restarts, st.NextStart.UTC().Format(time.RFC3339))
}

// checkLease refuses an answer that echoes another lease than the call's, or that comes
// after the resource's lease moved on: the provisioner then drops it as a fenced write.
func (e *externalEnviron) checkLease(ctx context.Context, call string, r *environ.Resource, sent, echoed *Lease) error {
	if !sameLease(sent, echoed) {
		return e.client.garbage(call, fmt.Sprintf("the answer echoes lease %s, not the call's %s", describeLease(echoed), describeLease(sent)))
	}
	if sent == nil || e.resources == nil {
		return nil
	}
	row, err := e.resources.GetResource(ctx, r.ID)
	switch {
	case errors.Is(err, domain.ErrNotFound) && call == "deprovision":
		return nil
	case errors.Is(err, domain.ErrNotFound):
		return &staleLeaseError{BrokerError: &BrokerError{Provisioner: e.name, Call: call, Class: ClassStaleLease, Msg: "the resource's row is gone: the answer is not kept"}}
	case err != nil:
		return fmt.Errorf("%s %s: read the resource's lease to accept the broker's answer: %w", r.Type, r.ID, err)
	case row.LeaseToken != sent.Token:
		return &staleLeaseError{holder: row.LeaseHolder, BrokerError: &BrokerError{Provisioner: e.name, Call: call, Class: ClassStaleLease,
			Msg: fmt.Sprintf("the answer came under lease token %d, but the resource's lease is now token %d of %s: the answer is not kept", sent.Token, row.LeaseToken, holderName(row.LeaseHolder))}}
	}
	return nil
}

// handshake returns the broker's info, asking for it once per broker process (or, for a
// dialed broker, again after it was unreachable). A broker the agent just started is given
// startupWait to listen.
func (e *externalEnviron) handshake(ctx context.Context) (*Info, error) {
	starts := 0
	if e.supervisor != nil {
		e.supervisor.Start()
		starts = e.supervisor.Status().Starts
	}
	e.mu.Lock()
	if e.info != nil && e.infoStarts == starts {
		info := e.info
		e.mu.Unlock()
		return info, nil
	}
	e.mu.Unlock()
	var info Info
	err := e.client.do(ctx, "info", PathInfo, nil, &info)
	deadline := e.clock.Now().Add(startupWait)
	// A broker just started is given time to listen; one that is down waits for its
	// restart, which the call does not.
	for err != nil && e.supervisor != nil && unreachable(err) && e.processDown() == "" && e.clock.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return nil, err
		case <-e.clock.After(100 * time.Millisecond):
		}
		err = e.client.do(ctx, "info", PathInfo, nil, &info)
	}
	if err != nil {
		return nil, e.explainUnreachable(err)
	}
	if info.ProtocolVersion != ProtocolVersion {
		return nil, e.client.garbage("info", fmt.Sprintf("the broker speaks protocol version %d, this agent %d: upgrade the broker (or the agent)", info.ProtocolVersion, ProtocolVersion))
	}
	if e.spec.Hibernate && !slices.Contains(info.Capabilities, CapabilityHibernate) {
		return nil, environ.Permanent(&BrokerError{Provisioner: e.name, Call: "info", Class: ClassPermanent,
			Msg: `the spec says "hibernate": true but the broker does not list the hibernate capability: drop it from the spec, or upgrade the broker`})
	}
	for _, t := range e.spec.Types {
		if !slices.Contains(info.Types, t) {
			return nil, environ.Permanent(&BrokerError{Provisioner: e.name, Call: "info", Class: ClassPermanent,
				Msg: fmt.Sprintf("the spec declares type %q but the broker serves %s: fix the spec's \"types\"", t, strings.Join(info.Types, ", "))})
		}
	}
	if e.supervisor != nil {
		// The process that answered is the latest one started (the broker may have been
		// started while the call waited for it to listen).
		starts = e.supervisor.Status().Starts
	}
	e.mu.Lock()
	if e.info == nil || e.infoStarts != starts {
		e.logger.Info("broker handshake", "protocol_version", info.ProtocolVersion, "types", info.Types, "capabilities", info.Capabilities)
	}
	e.info, e.infoStarts = &info, starts
	e.mu.Unlock()
	return &info, nil
}

// forgetOnUnreachable drops the handshake of a broker a call could not reach: it may come
// back as another version.
func (e *externalEnviron) forgetOnUnreachable(err error) {
	if err == nil || !unreachable(err) {
		return
	}
	e.mu.Lock()
	e.info = nil
	e.mu.Unlock()
}

// unreachable says err is a call that reached no broker.
func unreachable(err error) bool {
	u, ok := environ.IsUnavailable(err)
	return ok && u.Class == environ.UnavailableConnection
}

// resourceOf is the resource a broker's answer to call returns for r.
func (e *externalEnviron) resourceOf(ctx context.Context, call string, r *environ.Resource, resp *Response) (*environ.Resource, error) {
	if resp.Resource == nil {
		return nil, e.client.garbage(call, `the answer has no "resource"`)
	}
	if resp.Resource.ID != r.ID {
		return nil, e.client.garbage(call, fmt.Sprintf("the answer is about resource %q, the call about %q", resp.Resource.ID, r.ID))
	}
	if key := secretKey(resp.Resource.Config, ""); key != "" {
		return nil, environ.Permanent(&BrokerError{Provisioner: e.name, Call: call, Class: ClassPermanent,
			Msg: fmt.Sprintf("the broker put a secret in the resource's config (key %q): config is stored and shown, so a broker returns a reference to the secret (e.g. %q)", key, key+"_file")})
	}
	return &environ.Resource{ID: r.ID, Type: r.Type, State: resp.Resource.State, Config: resp.Resource.Config, Repairs: resp.Repairs, Notice: resp.Notice}, nil
}

// secretWords are what a config key holding a secret is named after; a key that ends in
// one of referenceSuffixes names a reference to one, which is allowed, and so do the key
// and namespace of a Kubernetes Secret beside its name (secretRefParts).
var (
	secretWords       = []string{"password", "passwd", "secret", "token", "dsn", "kubeconfig", "private_key", "credentials"}
	referenceSuffixes = []string{"_file", "_ref", "_path", "_name"}
	// secretRefParts end the keys that, with <stem>_secret_name beside them, complete a
	// reference to a key of a Kubernetes Secret, as Berth's own configs spell it
	// (password_secret_name, password_secret_key, password_secret_namespace). Without the
	// name beside it, a key such as aws_secret_key is taken for the secret it may be.
	secretRefParts = []string{"_secret_key", "_secret_namespace"}
)

// secretKey returns the first key of config (its path, nested keys dotted) that looks like
// it holds a secret, "" when none does.
func secretKey(config map[string]any, prefix string) string {
	for k, v := range config {
		if nested, ok := v.(map[string]any); ok {
			if found := secretKey(nested, prefix+k+"."); found != "" {
				return found
			}
			continue
		}
		lower := strings.ToLower(k)
		reference := false
		for _, suffix := range referenceSuffixes {
			reference = reference || strings.HasSuffix(lower, suffix)
		}
		if reference || partOfSecretRef(config, lower) {
			continue
		}
		var named []string
		for _, word := range secretWords {
			if strings.Contains(lower, word) {
				named = append(named, word)
			}
		}
		if len(named) == 1 && named[0] == "dsn" && credentiallessDSN(v) {
			continue
		}
		if len(named) > 0 {
			return prefix + k
		}
	}
	return ""
}

// credentiallessDSN reports whether v is a DSN in URL form that carries no credential: a
// user name at most, as Berth's own ClickHouse config gives it
// (clickhouse://default@host:9000/default), no password in its user info and no query
// parameter named like a secret. A DSN in any other form is taken for a secret.
func credentiallessDSN(v any) bool {
	s, ok := v.(string)
	if !ok {
		return false
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return false
	}
	if _, set := u.User.Password(); set {
		return false
	}
	for param := range u.Query() {
		for _, word := range secretWords {
			if strings.Contains(strings.ToLower(param), word) {
				return false
			}
		}
	}
	return true
}

// partOfSecretRef reports whether key (lower case) of config is the key or namespace of a
// Kubernetes Secret whose name config names beside it.
func partOfSecretRef(config map[string]any, key string) bool {
	for _, part := range secretRefParts {
		stem, ok := strings.CutSuffix(key, part)
		if !ok {
			continue
		}
		for k := range config {
			if strings.EqualFold(k, stem+"_secret_name") {
				return true
			}
		}
	}
	return false
}

func sameLease(a, b *Lease) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func describeLease(l *Lease) string {
	if l == nil {
		return "none"
	}
	return fmt.Sprintf("token %d of %s", l.Token, holderName(l.Holder))
}

func holderName(holder string) string {
	if holder == "" {
		return "nobody"
	}
	return holder
}
