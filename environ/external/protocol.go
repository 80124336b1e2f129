package external

import (
	"github.com/berth-dev/berth/environ"
)

// ProtocolVersion is the version of the broker protocol this agent speaks: the "v1" of every
// path and the protocol_version a broker's GET /v1/info must answer.
const ProtocolVersion = 1

// The protocol's paths.
const (
	PathInfo          = "/v1/info"
	PathReconcile     = "/v1/reconcile"
	PathAwaitReady    = "/v1/await-ready"
	PathDeprovision   = "/v1/deprovision"
	PathCheck         = "/v1/check"
	PathCheckResource = "/v1/check-resource"
	PathHibernate     = "/v1/hibernate"
	PathCapacity      = "/v1/capacity"
)

// The protocol's request headers.
const (
	// HeaderDeadline is when the agent stops waiting for the answer (RFC 3339, UTC, with
	// fractional seconds). A broker stops work it cannot finish by then, and refuses a call
	// whose deadline has passed with an error of class retryable.
	HeaderDeadline = "Berth-Deadline"
	// HeaderProtocol is the protocol version of the agent making the call.
	HeaderProtocol = "Berth-Protocol-Version"
	// HeaderProvisioner is the name of the provisioner making the call.
	HeaderProvisioner = "Berth-Provisioner"
)

// The optional capabilities a broker lists in its info.
const (
	CapabilityHibernate = "hibernate"
	CapabilityCapacity  = "capacity"
)

// ErrorClass says what the agent does with a broker's refusal.
type ErrorClass string

// The error classes of the protocol.
const (
	// ClassPermanent: retrying cannot help until the resource's args change (invalid args).
	ClassPermanent ErrorClass = "permanent"
	// ClassRetryable: the call failed this time; the agent retries with backoff.
	ClassRetryable ErrorClass = "retryable"
	// ClassUnavailable: the broker or what it drives is down for every resource; the call
	// counts towards the provisioner's circuit breaker.
	ClassUnavailable ErrorClass = "unavailable"
	// ClassNoCapacity: no room for the resource now; the agent waits for capacity.
	ClassNoCapacity ErrorClass = "no_capacity"
	// ClassStaleLease: the call's lease token is older than one the broker saw for the
	// resource; the agent drops the attempt, as it drops one whose database write was fenced.
	ClassStaleLease ErrorClass = "stale_lease"
	// ClassNotSupported: the broker does not implement the call (an optional capability).
	ClassNotSupported ErrorClass = "not_supported"
)

var knownClasses = map[ErrorClass]bool{
	ClassPermanent: true, ClassRetryable: true, ClassUnavailable: true,
	ClassNoCapacity: true, ClassStaleLease: true, ClassNotSupported: true,
}

// Info is the answer of GET /v1/info, the handshake.
type Info struct {
	ProtocolVersion int      `json:"protocol_version"`
	Name            string   `json:"name,omitempty"`
	Types           []string `json:"types"`
	Capabilities    []string `json:"capabilities,omitempty"`
}

// Lease is the reconcile lease a call is made under: the agent that holds it and its
// token, which grows with every claim of the resource. A broker remembers the largest token
// it saw per resource, refuses a smaller one (class stale_lease) and echoes the call's lease
// in its answer.
type Lease struct {
	Holder string `json:"holder"`
	Token  int64  `json:"token"`
}

// Resource is a resource as it crosses the protocol.
type Resource struct {
	ID     string         `json:"id"`
	Type   string         `json:"type"`
	State  map[string]any `json:"state"`
	Config map[string]any `json:"config"`
}

// Options is the desired state of a resource.
type Options struct {
	Name        string            `json:"name,omitempty"`
	Owner       string            `json:"owner,omitempty"`
	Args        map[string]any    `json:"args"`
	Generation  int64             `json:"generation"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
}

// Request is the body of every POST of the protocol; a call uses the fields it needs.
type Request struct {
	Resource *Resource `json:"resource,omitempty"`
	Options  *Options  `json:"options,omitempty"`
	Lease    *Lease    `json:"lease"`
}

// Response is the body of a successful answer.
type Response struct {
	Resource *Resource `json:"resource,omitempty"`
	// Lease echoes the request's lease: the agent refuses an answer that echoes another.
	Lease   *Lease   `json:"lease"`
	Ready   *bool    `json:"ready,omitempty"`
	Repairs []string `json:"repairs,omitempty"`
	Notice  string   `json:"notice,omitempty"`
	// RetryAfterSeconds is, for await-ready answering not ready, when to ask again.
	RetryAfterSeconds float64 `json:"retry_after_seconds,omitempty"`
	// Message is, for check, a remark on a healthy broker (e.g. its version).
	Message string `json:"message,omitempty"`
}

// ErrorBody is the body of an answer with a 4xx or 5xx status.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is what a broker says of a failed call.
type ErrorDetail struct {
	Class   ErrorClass `json:"class"`
	Message string     `json:"message"`
	// Field names the arg at fault for a permanent error, e.g. "args.size".
	Field             string  `json:"field,omitempty"`
	RetryAfterSeconds float64 `json:"retry_after_seconds,omitempty"`
}

// CapacityAnswer is the answer of GET /v1/capacity.
type CapacityAnswer struct {
	Unit  string         `json:"unit"`
	Total int64          `json:"total"`
	Used  int64          `json:"used"`
	Hosts []HostCapacity `json:"hosts,omitempty"`
}

// HostCapacity is one host's share of a broker's capacity.
type HostCapacity struct {
	Host  string `json:"host"`
	Total int64  `json:"total"`
	Used  int64  `json:"used"`
	Down  bool   `json:"down,omitempty"`
}

func wireResource(r *environ.Resource) *Resource {
	state, config := r.State, r.Config
	if state == nil {
		state = map[string]any{}
	}
	if config == nil {
		config = map[string]any{}
	}
	return &Resource{ID: r.ID, Type: string(r.Type), State: state, Config: config}
}

func wireOptions(opts *environ.ResourceOptions) *Options {
	if opts == nil {
		return &Options{Args: map[string]any{}}
	}
	args := opts.Args
	if args == nil {
		args = map[string]any{}
	}
	return &Options{Name: opts.Name, Owner: opts.Owner, Args: args, Generation: opts.Generation, Annotations: opts.Annotations, Labels: opts.Labels}
}

func wireLease(r *environ.Resource) *Lease {
	if r.Lease == nil {
		return nil
	}
	return &Lease{Holder: r.Lease.Holder, Token: r.Lease.Token}
}
