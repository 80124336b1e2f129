package external

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// VerifyConfig says what the conformance suite provisions.
type VerifyConfig struct {
	// Type is the resource type to provision (one the broker serves).
	Type string
	// Args are valid args of Type (none: {}).
	Args map[string]any
	// ReadyTimeout bounds the wait for the resource to be ready.
	ReadyTimeout time.Duration
}

// CheckResult is one check of the conformance suite.
type CheckResult struct {
	Name   string
	Passed bool
	// Detail says what was seen: why it failed, or a remark on a pass.
	Detail string
}

// promptly is how soon a cancelled call, and a call whose deadline passed, must return.
const promptly = 2 * time.Second

// unknownArg is an arg no broker takes: the suite expects it refused as permanent.
const unknownArg = "berth-verify-unknown-arg"

// Verify runs the conformance suite against the broker of spec (a provisioner spec of type
// external: its command, socket or url) and returns one result per check, in order. It
// starts the broker itself when spec has a command, and stops it before returning. An error
// is a spec it cannot use; a broker that fails a check is a result.
func Verify(ctx context.Context, spec json.RawMessage, cfg VerifyConfig, deps environ.Deps) ([]CheckResult, error) {
	env, err := New("verify", spec, deps)
	if err != nil {
		return nil, err
	}
	defer env.Close()
	if cfg.Args == nil {
		cfg.Args = map[string]any{}
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = time.Minute
	}
	v := &verifier{env: asExternal(env), cfg: cfg, prefix: "berth-verify-" + randomHex(), ids: map[string]string{}}
	return v.run(ctx), nil
}

type verifier struct {
	env     *externalEnviron
	cfg     VerifyConfig
	prefix  string
	ids     map[string]string // resource ids by the suite's names
	token   int64
	results []CheckResult
}

func (v *verifier) run(ctx context.Context) []CheckResult {
	info, err := v.env.handshake(ctx)
	if err != nil {
		v.fail("handshake", err.Error())
		return v.results
	}
	v.pass("handshake", fmt.Sprintf("protocol %d, types %s, capabilities %s", info.ProtocolVersion, strings.Join(info.Types, ", "), orNone(info.Capabilities)))
	v.check("check", func() error { return v.env.Check(ctx) })

	main := v.resource("main")
	first, err := v.env.Reconcile(ctx, main, v.opts(v.cfg.Args))
	if err != nil {
		v.fail("reconcile", err.Error())
		return v.cleanup(ctx)
	}
	v.pass("reconcile", "")
	main.State, main.Config = first.State, first.Config
	v.check("reconcile-idempotent", func() error {
		again, err := v.env.Reconcile(ctx, v.leased(main), v.opts(v.cfg.Args))
		if err != nil {
			return err
		}
		if !sameJSON(again.State, first.State) || !sameJSON(again.Config, first.Config) {
			return fmt.Errorf("a second reconcile with the same args changed the resource: state %s config %s, then state %s config %s",
				toJSON(first.State), toJSON(first.Config), toJSON(again.State), toJSON(again.Config))
		}
		return nil
	})
	v.check("await-ready", func() error {
		ctx, cancel := context.WithTimeout(ctx, v.cfg.ReadyTimeout)
		defer cancel()
		return v.env.AwaitReady(ctx, v.leased(main))
	})
	v.check("check-resource", func() error {
		got, err := v.env.CheckResource(ctx, v.unleased(main), v.opts(v.cfg.Args))
		if err != nil {
			return err
		}
		main.State = got.State
		return nil
	})
	v.check("stale-lease-refused", func() error {
		current := v.leased(main)
		stale := v.unleased(main)
		stale.Lease = &domain.Lease{Holder: current.Lease.Holder, Token: current.Lease.Token - 1}
		if _, err := v.env.Reconcile(ctx, current, v.opts(v.cfg.Args)); err != nil {
			return fmt.Errorf("reconcile under lease token %d: %w", current.Lease.Token, err)
		}
		_, err := v.env.Reconcile(ctx, stale, v.opts(v.cfg.Args))
		if !errors.Is(err, domain.ErrLeaseHeld) {
			return fmt.Errorf("a reconcile under token %d after token %d was not refused with class %q (got: %v)", stale.Lease.Token, current.Lease.Token, ClassStaleLease, errOrSuccess(err))
		}
		return nil
	})
	v.check("invalid-args-permanent", func() error {
		args := map[string]any{unknownArg: true}
		for k, val := range v.cfg.Args {
			args[k] = val
		}
		_, err := v.env.Reconcile(ctx, v.resource("invalid"), v.opts(args))
		var be *BrokerError
		if !environ.IsPermanent(err) || !errors.As(err, &be) || be.Class != ClassPermanent {
			return fmt.Errorf("a reconcile with the unknown arg %q was not refused with class %q (got: %v)", unknownArg, ClassPermanent, errOrSuccess(err))
		}
		return nil
	})
	v.check("deadline-passed-refused", func() error { return v.deadlinePassed(ctx) })
	v.check("cancellation", func() error { return v.cancellation(ctx) })
	if slices.Contains(info.Capabilities, CapabilityHibernate) {
		v.check("hibernate-and-wake", func() error {
			slept, err := v.env.hibernate(ctx, v.leased(main), v.opts(v.cfg.Args))
			if err != nil {
				return fmt.Errorf("hibernate: %w", err)
			}
			if _, err := v.env.hibernate(ctx, v.leased(&environ.Resource{ID: main.ID, Type: main.Type, State: slept.State, Config: slept.Config}), v.opts(v.cfg.Args)); err != nil {
				return fmt.Errorf("hibernate again (must be a success): %w", err)
			}
			woken, err := v.env.Reconcile(ctx, v.leased(&environ.Resource{ID: main.ID, Type: main.Type, State: slept.State, Config: slept.Config}), v.opts(v.cfg.Args))
			if err != nil {
				return fmt.Errorf("wake (reconcile): %w", err)
			}
			main.State, main.Config = woken.State, woken.Config
			return nil
		})
	}
	v.check("deprovision", func() error { return v.env.Deprovision(ctx, v.leased(main)) })
	v.check("deprovision-again", func() error { return v.env.Deprovision(ctx, v.leased(main)) })
	v.check("deprovision-missing", func() error { return v.env.Deprovision(ctx, v.leased(v.resource("never-created"))) })
	return v.cleanup(ctx)
}

// deadlinePassed sends a reconcile whose Berth-Deadline has passed: the broker must refuse
// it, promptly, with an error of the protocol.
func (v *verifier) deadlinePassed(ctx context.Context) error {
	r := v.leased(v.resource("late"))
	body, _ := json.Marshal(Request{Resource: wireResource(r), Options: wireOptions(v.opts(v.cfg.Args)), Lease: wireLease(r)})
	ctx, cancel := context.WithTimeout(ctx, promptly)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, v.env.client.base+PathReconcile, strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(HeaderProtocol, fmt.Sprint(ProtocolVersion))
	req.Header.Set(HeaderDeadline, time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano))
	if v.env.client.tokenFile != "" {
		token, err := v.env.client.token()
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := v.env.client.http.Do(req)
	if err != nil {
		return fmt.Errorf("no answer within %s to a call whose %s had passed: %w", promptly, HeaderDeadline, err)
	}
	defer resp.Body.Close()
	var answer ErrorBody
	if resp.StatusCode/100 == 2 {
		return fmt.Errorf("a call whose %s had passed was carried out (%s): refuse it with class %q", HeaderDeadline, resp.Status, ClassRetryable)
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || !knownClasses[answer.Error.Class] {
		return fmt.Errorf("a call whose %s had passed was refused with %s but without the protocol's error body", HeaderDeadline, resp.Status)
	}
	return nil
}

// cancellation cancels a reconcile mid-way: the call must return promptly, and the broker
// must then still answer and converge the resource.
func (v *verifier) cancellation(ctx context.Context) error {
	r := v.resource("cancelled")
	callCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := v.env.Reconcile(callCtx, v.leased(r), v.opts(v.cfg.Args))
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(promptly):
		return fmt.Errorf("a reconcile cancelled mid-way did not return within %s", promptly)
	}
	if _, err := v.env.Reconcile(ctx, v.leased(r), v.opts(v.cfg.Args)); err != nil {
		return fmt.Errorf("a reconcile after a cancelled one failed: %w", err)
	}
	if err := v.env.Deprovision(ctx, v.leased(r)); err != nil {
		return fmt.Errorf("deprovision after a cancelled reconcile failed: %w", err)
	}
	return nil
}

// cleanup deprovisions what the suite may have left (failures of cleanup are not results).
func (v *verifier) cleanup(ctx context.Context) []CheckResult {
	for _, name := range []string{"main", "invalid", "late", "cancelled"} {
		_ = v.env.Deprovision(ctx, v.leased(v.resource(name)))
	}
	return v.results
}

func (v *verifier) check(name string, fn func() error) {
	if err := fn(); err != nil {
		v.fail(name, err.Error())
		return
	}
	v.pass(name, "")
}

func (v *verifier) pass(name, detail string) {
	v.results = append(v.results, CheckResult{Name: name, Passed: true, Detail: detail})
}

func (v *verifier) fail(name, detail string) {
	v.results = append(v.results, CheckResult{Name: name, Detail: detail})
}

// resource is the suite's resource called name, with an id of its own (a UUID, as the
// agent's resources have).
func (v *verifier) resource(name string) *environ.Resource {
	id, ok := v.ids[name]
	if !ok {
		id = uuid.NewString()
		v.ids[name] = id
	}
	return &environ.Resource{ID: id, Type: domain.ResourceType(v.cfg.Type)}
}

// leased returns r under the next lease token.
func (v *verifier) leased(r *environ.Resource) *environ.Resource {
	v.token++
	out := *r
	out.Lease = &domain.Lease{Holder: "berth-verify", Token: v.token}
	return &out
}

func (v *verifier) unleased(r *environ.Resource) *environ.Resource {
	out := *r
	out.Lease = nil
	return &out
}

func (v *verifier) opts(args map[string]any) *environ.ResourceOptions {
	return &environ.ResourceOptions{Name: v.prefix, Owner: "berth-verify", Args: args, Generation: 1}
}

func sameJSON(a, b map[string]any) bool {
	var x, y any
	_ = json.Unmarshal([]byte(toJSON(a)), &x)
	_ = json.Unmarshal([]byte(toJSON(b)), &y)
	return reflect.DeepEqual(x, y)
}

func toJSON(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(data)
}

func errOrSuccess(err error) string {
	if err == nil {
		return "success"
	}
	return err.Error()
}

func orNone(list []string) string {
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}

func randomHex() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
