package watcher

import (
	"time"

	"github.com/berth-dev/berth/internal/setting"
)

// The resources watcher's defaults (the agent's flags start from them).
const (
	// DefaultPollInterval is how often the change log is read when no wake-up arrives: a
	// lost wake-up delays a change by at most two seconds.
	DefaultPollInterval = 2 * time.Second
	// DefaultGapTimeout is how long a skipped sequence number is looked up again: far longer
	// than any transaction that writes to the change log stays open.
	DefaultGapTimeout = time.Minute
	// DefaultBatchSize is the most change-log entries one query reads.
	DefaultBatchSize = 1000
	// DefaultEventSize is the most ids one event delivers: small, so that the consumer
	// takes events often and an owner's change that arrives behind another owner's backlog
	// reaches it after a handful of reconciles (an event costs microseconds).
	DefaultEventSize = 8
	// DefaultReadAhead is how many ids the watcher holds for its consumer: enough to see
	// every owner of a burst of tens of thousands, some 15 MB at most.
	DefaultReadAhead = 100_000
	// DefaultOwnerPoliciesInterval is how often the owners' weights are read again.
	DefaultOwnerPoliciesInterval = 10 * time.Second
)

// ResourcesSettings tune the resources watcher. ResourcesConfig embeds them, so that
// Validate is their one check.
type ResourcesSettings struct {
	// PollInterval is how often the change log is read when no wake-up arrives, and how
	// often the resources of dead agents and overdue retries are looked up.
	PollInterval time.Duration
	// OverdueAfter is how long past its due time an unleased resource's retry is left to the
	// agent that scheduled it before this watcher reports it (see the package doc); the
	// agents' --agent-ttl.
	OverdueAfter time.Duration
	// GapTimeout is how long a skipped sequence number is looked up again before it is taken
	// as rolled back (see the package doc).
	GapTimeout time.Duration
	// BatchSize is the most change-log entries one query reads, and the size of a page of
	// the resources needing attention.
	BatchSize int
	// EventSize is the most ids one event delivers.
	EventSize int
	// ReadAhead is how many ids the watcher reads ahead of its consumer, so that the owners
	// of what waits can take turns (see the package doc); beyond it, what is read next
	// follows change order. At least BatchSize.
	ReadAhead int
	// OwnerPoliciesInterval is how often the owners' weights are read again.
	OwnerPoliciesInterval time.Duration
}

// DefaultResourcesSettings are the settings' defaults; OverdueAfter has none: it is the
// agents' TTL.
func DefaultResourcesSettings() ResourcesSettings {
	return ResourcesSettings{
		PollInterval: DefaultPollInterval,
		GapTimeout:   DefaultGapTimeout,
		BatchSize:    DefaultBatchSize,
		EventSize:    DefaultEventSize,
		ReadAhead:    DefaultReadAhead,

		OwnerPoliciesInterval: DefaultOwnerPoliciesInterval,
	}
}

// Validate reports the first setting that is not valid (a *setting.Error, NotValid),
// naming it.
func (s ResourcesSettings) Validate() error {
	switch {
	case s.PollInterval <= 0:
		return setting.Invalid("PollInterval", s.PollInterval, "must be positive")
	case s.OverdueAfter <= 0:
		return setting.Invalid("OverdueAfter", s.OverdueAfter, "must be positive: pass the agents' --agent-ttl")
	case s.GapTimeout <= 0:
		return setting.Invalid("GapTimeout", s.GapTimeout, "must be positive")
	case s.BatchSize < 1:
		return setting.Invalid("BatchSize", s.BatchSize, "must be at least 1")
	case s.EventSize < 1:
		return setting.Invalid("EventSize", s.EventSize, "must be at least 1")
	case s.ReadAhead < s.BatchSize:
		return setting.Invalid("ReadAhead", s.ReadAhead, "must be at least %s", setting.Ref{Name: "BatchSize", Value: s.BatchSize})
	case s.OwnerPoliciesInterval <= 0:
		return setting.Invalid("OwnerPoliciesInterval", s.OwnerPoliciesInterval, "must be positive")
	}
	return nil
}
