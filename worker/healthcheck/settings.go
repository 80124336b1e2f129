package healthcheck

import (
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/internal/setting"
)

// The settings' defaults (the agent's flags start from them).
const (
	// DefaultInterval is how often every ready resource is checked.
	DefaultInterval = time.Minute
	// DefaultConcurrency is how many resource checks run at once.
	DefaultConcurrency = 8
	// DefaultPageSize is how many resources one query reads: few queries per round, small
	// enough to hold in memory.
	DefaultPageSize = 500
	// DefaultCheckTimeout bounds one resource's check, so that one unreachable resource
	// does not hold a check slot for the whole round.
	DefaultCheckTimeout = 30 * time.Second
)

// Settings tune the worker. ManifoldConfig embeds them and hands them to Config whole, so
// that Validate is their one check.
type Settings struct {
	// Agent is this agent: Agent.ID is its identity on reconcile leases (the provisioner's),
	// and resources another holder's live lease is on are not checked; Agent.TTL is how long
	// another agent counts as live after its last heartbeat.
	Agent domain.AgentIdentity

	Interval     time.Duration // how often every resource is checked
	Concurrency  int           // most resource checks in flight at once
	PageSize     int           // resources read per query
	CheckTimeout time.Duration // bounds one CheckResource
}

// DefaultSettings are the settings' defaults; Agent has none: it is the agent's own.
func DefaultSettings() Settings {
	return Settings{
		Interval:     DefaultInterval,
		Concurrency:  DefaultConcurrency,
		PageSize:     DefaultPageSize,
		CheckTimeout: DefaultCheckTimeout,
	}
}

// Validate reports the first setting that is not valid (NotValid, a *setting.Error for
// the settings besides Agent), naming it.
func (s Settings) Validate() error {
	if err := s.Agent.Validate(); err != nil {
		return err
	}
	switch {
	case s.Interval <= 0:
		return setting.Invalid("Interval", s.Interval, "must be positive")
	case s.Concurrency < 1:
		return setting.Invalid("Concurrency", s.Concurrency, "must be at least 1")
	case s.PageSize < 1:
		return setting.Invalid("PageSize", s.PageSize, "must be at least 1")
	case s.CheckTimeout <= 0:
		return setting.Invalid("CheckTimeout", s.CheckTimeout, "must be positive")
	}
	return nil
}
