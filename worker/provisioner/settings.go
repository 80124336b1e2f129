package provisioner

import (
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/internal/setting"
)

// The settings' defaults, which suit a production agent (the agent's flags start from them).
const (
	// DefaultConcurrency is the most reconciles run at once, those awaiting their resource
	// aside: the ceiling of the adaptive limit, which starts at InitialConcurrency and grows
	// only while more in flight raises throughput (limit.go). The static pool's groups of
	// writes are fastest at 1,024, where every group the database writes is full; a broker
	// that more places do not help stays near the floor whatever the ceiling.
	DefaultConcurrency = 1024
	// DefaultAwaitConcurrency is how many more reconciles may wait for their resource to
	// serve: rollouts are slow and cheap to wait for.
	DefaultAwaitConcurrency = 256
	// DefaultLeaseTTL is twice DefaultReconcileTimeout: a lease outlives the attempt it
	// guards even when the attempt runs to its limit.
	DefaultLeaseTTL = 10 * time.Minute
	// DefaultReconcileTimeout bounds one attempt: long enough for an image pull and a
	// rollout.
	DefaultReconcileTimeout = 5 * time.Minute
	// DefaultBackoffBase is the first retry delay after a failed attempt.
	DefaultBackoffBase = time.Second
	// DefaultBackoffMax is the longest retry delay: a broken resource is retried at least
	// this often.
	DefaultBackoffMax = 5 * time.Minute
	// DefaultCapacityRetry is the longest wait between retries of a resource waiting for
	// capacity, which another resource's deletion may free at any time.
	DefaultCapacityRetry = 30 * time.Second
	// DefaultOwnerPoliciesInterval is how often the owners' weights and classes are read
	// again: one query of a small table.
	DefaultOwnerPoliciesInterval = 10 * time.Second
)

// Settings tune the worker. ManifoldConfig embeds them and hands them to Config whole, so
// that Validate is their one check.
type Settings struct {
	// Agent is this agent: Agent.ID is its identity on reconcile leases, Agent.TTL how
	// long another agent counts as live after its last heartbeat.
	Agent domain.AgentIdentity
	// Concurrency is the most reconciles in flight at once, a reconcile awaiting its
	// resource aside: the ceiling of the adaptive limit (limit.go), which starts at
	// MinConcurrency, or at Concurrency when that is lower and then stays there.
	Concurrency int
	// MinConcurrency is where the adaptive limit starts and the lowest it goes back to (0:
	// InitialConcurrency); at Concurrency or above, the limit is fixed at Concurrency.
	MinConcurrency int
	// AwaitConcurrency is how many more reconciles may be in flight while some wait for
	// their resource to serve (a Kubernetes rollout): a waiting reconcile gives its place
	// back, so that a slow rollout does not keep other resources from being applied, and
	// keeps its lease and lock until it ends. At most Concurrency + AwaitConcurrency are in
	// flight, at most Concurrency of them not waiting.
	AwaitConcurrency int

	LeaseTTL         time.Duration // must exceed ReconcileTimeout
	ReconcileTimeout time.Duration // per attempt: Reconcile and AwaitReady, or Deprovision
	BackoffBase      time.Duration // first retry delay (see backoff)
	BackoffMax       time.Duration // retry delays never exceed it
	CapacityRetry    time.Duration // longest wait between retries of a resource waiting for capacity
	// ShareGrace is how long a changed resource is left to its rendezvous owner (the agents'
	// --heartbeat-interval), and how old the list of live agents may get.
	ShareGrace time.Duration
	// OwnerPoliciesInterval is how often the owners' weights (the queue's turns) and
	// classes (the queue-depth metric's labels) are read again; see Config.Owners.
	OwnerPoliciesInterval time.Duration
	// MetricsOwnerLabels labels the queue depth by owner instead of by owner class: only
	// for a store with few owners, since every owner becomes a time series.
	MetricsOwnerLabels bool
}

// DefaultSettings are the settings' defaults; Agent and ShareGrace have none: they are the
// agent's own.
func DefaultSettings() Settings {
	return Settings{
		Concurrency:      DefaultConcurrency,
		MinConcurrency:   InitialConcurrency,
		AwaitConcurrency: DefaultAwaitConcurrency,
		LeaseTTL:         DefaultLeaseTTL,
		ReconcileTimeout: DefaultReconcileTimeout,
		BackoffBase:      DefaultBackoffBase,
		BackoffMax:       DefaultBackoffMax,
		CapacityRetry:    DefaultCapacityRetry,

		OwnerPoliciesInterval: DefaultOwnerPoliciesInterval,
	}
}

// Validate reports the first setting that is not valid (NotValid, a *setting.Error for
// the settings besides Agent), naming it and the fix.
func (s Settings) Validate() error {
	if err := s.Agent.Validate(); err != nil {
		return err
	}
	switch {
	case s.Concurrency < 1:
		return setting.Invalid("Concurrency", s.Concurrency, "must be at least 1")
	case s.MinConcurrency < 0:
		return setting.Invalid("MinConcurrency", s.MinConcurrency, "must be at least 1 (or 0 for the default)")
	case s.AwaitConcurrency < 1:
		return setting.Invalid("AwaitConcurrency", s.AwaitConcurrency, "must be at least 1")
	case s.ReconcileTimeout <= 0:
		return setting.Invalid("ReconcileTimeout", s.ReconcileTimeout, "must be positive")
	case s.LeaseTTL <= s.ReconcileTimeout:
		return setting.Invalid("LeaseTTL", s.LeaseTTL, "must exceed %s, or another agent could take over a resource mid-reconcile: raise %s",
			setting.Ref{Name: "ReconcileTimeout", Value: s.ReconcileTimeout}, setting.Ref{Name: "LeaseTTL"})
	case s.BackoffBase <= 0:
		return setting.Invalid("BackoffBase", s.BackoffBase, "must be positive")
	case s.BackoffMax < s.BackoffBase:
		return setting.Invalid("BackoffMax", s.BackoffMax, "must be at least %s", setting.Ref{Name: "BackoffBase", Value: s.BackoffBase})
	case s.CapacityRetry <= 0:
		return setting.Invalid("CapacityRetry", s.CapacityRetry, "must be positive")
	case s.ShareGrace <= 0:
		return setting.Invalid("ShareGrace", s.ShareGrace, "must be positive: pass the agents' --heartbeat-interval")
	case s.OwnerPoliciesInterval <= 0:
		return setting.Invalid("OwnerPoliciesInterval", s.OwnerPoliciesInterval, "must be positive")
	}
	return nil
}
