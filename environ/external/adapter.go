package external

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// Adapter serves the broker protocol for an environ.Environ of this agent (static,
// kubernetes), so that the conformance suite can hold a built-in broker to the same
// contract as an external one. It fences calls on the lease tokens it saw itself, per
// resource, and hands the environ no lease: the resources it is asked about have no row in
// the agent's database.
type Adapter struct {
	Env environ.Environ
	// Types are the resource types served (those of Env in the registry's catalog).
	Types []domain.ResourceType
	// Now is the clock the calls' deadlines are read against.
	Now func() time.Time

	mu     sync.Mutex
	tokens map[string]int64 // the largest lease token seen per resource
}

// ServeHTTP implements http.Handler.
func (a *Adapter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == PathInfo && r.Method == http.MethodGet {
		a.info(w)
		return
	}
	if r.URL.Path == PathCapacity && r.Method == http.MethodGet {
		a.capacity(w, r)
		return
	}
	if r.Method != http.MethodPost {
		writeError(w, http.StatusNotFound, ErrorDetail{Class: ClassNotSupported, Message: r.Method + " " + r.URL.Path + " is not a call of the protocol"})
		return
	}
	ctx, cancel, ok := a.deadline(w, r)
	if !ok {
		return
	}
	defer cancel()
	var req Request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, ErrorDetail{Class: ClassPermanent, Message: "the request is not JSON: " + err.Error()})
		return
	}
	if r.URL.Path != PathCheck && req.Resource == nil {
		writeError(w, http.StatusBadRequest, ErrorDetail{Class: ClassPermanent, Message: `the request has no "resource"`})
		return
	}
	if r.URL.Path != PathCheck && r.URL.Path != PathAwaitReady && r.URL.Path != PathCheckResource && !a.fence(w, req.Resource.ID, req.Lease) {
		return
	}
	res, opts := a.resource(req.Resource), a.options(req.Options)
	resp := Response{Lease: req.Lease}
	var err error
	switch r.URL.Path {
	case PathCheck:
		err = a.Env.Check(ctx)
	case PathReconcile:
		res, err = a.Env.Reconcile(ctx, res, opts)
	case PathAwaitReady:
		err = a.Env.AwaitReady(ctx, res)
		ready := err == nil
		resp.Ready = &ready
		res = nil
	case PathDeprovision:
		err = a.Env.Deprovision(ctx, res)
		res = nil
	case PathCheckResource:
		res, err = a.Env.CheckResource(ctx, res, opts)
	case PathHibernate:
		h, ok := a.Env.(environ.Hibernator)
		if !ok {
			writeError(w, http.StatusNotImplemented, ErrorDetail{Class: ClassNotSupported, Message: "this broker does not hibernate"})
			return
		}
		res, err = h.Hibernate(ctx, res, opts)
	default:
		writeError(w, http.StatusNotFound, ErrorDetail{Class: ClassNotSupported, Message: r.URL.Path + " is not a call of the protocol"})
		return
	}
	if err != nil {
		status, detail := errorDetail(err)
		writeError(w, status, detail)
		return
	}
	if res != nil {
		resp.Resource = wireResource(res)
		resp.Repairs, resp.Notice = res.Repairs, res.Notice
	}
	writeJSON(w, http.StatusOK, resp)
}

func (a *Adapter) info(w http.ResponseWriter) {
	info := Info{ProtocolVersion: ProtocolVersion, Name: "berth " + a.Env.Type() + " (adapter)"}
	for _, t := range a.Types {
		info.Types = append(info.Types, string(t))
	}
	if _, ok := a.Env.(environ.Hibernator); ok {
		info.Capabilities = append(info.Capabilities, CapabilityHibernate)
	}
	if _, ok := a.Env.(environ.CapacityReporter); ok {
		info.Capabilities = append(info.Capabilities, CapabilityCapacity)
	}
	writeJSON(w, http.StatusOK, info)
}

func (a *Adapter) capacity(w http.ResponseWriter, r *http.Request) {
	c, ok := a.Env.(environ.CapacityReporter)
	if !ok {
		writeError(w, http.StatusNotImplemented, ErrorDetail{Class: ClassNotSupported, Message: "this broker reports no capacity"})
		return
	}
	got, err := c.Capacity(r.Context())
	if err != nil {
		status, detail := errorDetail(err)
		writeError(w, status, detail)
		return
	}
	answer := CapacityAnswer{Unit: got.Unit, Total: got.Total, Used: got.Used}
	for _, h := range got.Hosts {
		answer.Hosts = append(answer.Hosts, HostCapacity{Host: h.Host, Total: h.Total, Used: h.Used, Down: h.Down})
	}
	writeJSON(w, http.StatusOK, answer)
}

// deadline bounds the call's context by its Berth-Deadline, refusing a call whose deadline
// passed.
func (a *Adapter) deadline(w http.ResponseWriter, r *http.Request) (context.Context, context.CancelFunc, bool) {
	header := r.Header.Get(HeaderDeadline)
	if header == "" {
		ctx, cancel := context.WithCancel(r.Context())
		return ctx, cancel, true
	}
	deadline, err := time.Parse(time.RFC3339Nano, header)
	if err != nil {
		writeError(w, http.StatusBadRequest, ErrorDetail{Class: ClassPermanent, Message: HeaderDeadline + " is not an RFC 3339 time"})
		return nil, nil, false
	}
	now := time.Now
	if a.Now != nil {
		now = a.Now
	}
	if !now().Before(deadline) {
		writeError(w, http.StatusGatewayTimeout, ErrorDetail{Class: ClassRetryable, Message: "the call's deadline passed before it started"})
		return nil, nil, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), deadline.Sub(now()))
	return ctx, cancel, true
}

// fence refuses a call under an older lease token than one seen for resource id.
func (a *Adapter) fence(w http.ResponseWriter, id string, lease *Lease) bool {
	if lease == nil {
		return true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.tokens == nil {
		a.tokens = map[string]int64{}
	}
	if seen := a.tokens[id]; lease.Token < seen {
		writeError(w, http.StatusConflict, ErrorDetail{Class: ClassStaleLease, Message: fmt.Sprintf("lease token %d is older than token %d seen for resource %s", lease.Token, seen, id)})
		return false
	}
	a.tokens[id] = lease.Token
	return true
}

func (a *Adapter) resource(r *Resource) *environ.Resource {
	if r == nil {
		return nil
	}
	return &environ.Resource{ID: r.ID, Type: domain.ResourceType(r.Type), State: r.State, Config: r.Config}
}

func (a *Adapter) options(o *Options) *environ.ResourceOptions {
	if o == nil {
		return &environ.ResourceOptions{}
	}
	return &environ.ResourceOptions{Name: o.Name, Owner: o.Owner, Args: o.Args, Generation: o.Generation, Annotations: o.Annotations, Labels: o.Labels}
}

// errorDetail is the protocol's status and error of an environ's error.
func errorDetail(err error) (int, ErrorDetail) {
	detail := ErrorDetail{Message: err.Error()}
	var fe *domain.FieldError
	switch u, unavailable := environ.IsUnavailable(err); {
	case environ.IsPermanent(err):
		detail.Class = ClassPermanent
		if errors.As(err, &fe) {
			detail.Field = fe.Field
		}
		return http.StatusUnprocessableEntity, detail
	case errors.Is(err, domain.ErrNoCapacity):
		detail.Class = ClassNoCapacity
		return http.StatusConflict, detail
	case errors.Is(err, domain.ErrLeaseHeld):
		detail.Class = ClassStaleLease
		return http.StatusConflict, detail
	case unavailable:
		detail.Class, detail.RetryAfterSeconds = ClassUnavailable, u.RetryAfter.Seconds()
		return http.StatusServiceUnavailable, detail
	}
	detail.Class = ClassRetryable
	return http.StatusInternalServerError, detail
}

func writeError(w http.ResponseWriter, status int, detail ErrorDetail) {
	writeJSON(w, status, ErrorBody{Error: detail})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(HeaderProtocol, strconv.Itoa(ProtocolVersion))
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
