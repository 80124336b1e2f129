package membership

import (
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/internal/setting"
)

// The settings' defaults (the agent's flags start from them).
const (
	// DefaultHeartbeatInterval is the time between heartbeats; it bounds how stale the
	// other agents' view of this one gets.
	DefaultHeartbeatInterval = 2 * time.Second
	// DefaultTTL counts an agent live for seven heartbeats: a few late ones do not make it
	// look dead, and a dead agent's resources are taken over within seconds.
	DefaultTTL = 15 * time.Second
	// DefaultTimeout bounds each registration, heartbeat, listing and prune.
	DefaultTimeout = 10 * time.Second
	// DefaultResignTimeout bounds the resignation when the worker stops, which the agent's
	// shutdown waits for.
	DefaultResignTimeout = 5 * time.Second
	// DefaultPruneInterval is the time between prunes of dead agents.
	DefaultPruneInterval = time.Hour
	// DefaultPruneAfter keeps a dead agent listed for a day, so that an operator sees it.
	DefaultPruneAfter = 24 * time.Hour
)

// Settings tune the worker. ManifoldConfig embeds them and hands them to Config whole, so
// that Validate is their one check.
type Settings struct {
	Agent domain.AgentInfo // what this agent registers as; ID is required

	// HeartbeatInterval is the time between heartbeats.
	HeartbeatInterval time.Duration
	// TTL is how old an agent's last heartbeat may be for it to count as live.
	TTL time.Duration
	// Timeout bounds each registration, heartbeat, listing and prune.
	Timeout time.Duration
	// ResignTimeout bounds the resignation when the worker stops.
	ResignTimeout time.Duration
	// PruneInterval is the time between prunes of dead agents.
	PruneInterval time.Duration
	// PruneAfter is how long an agent must have been silent to be pruned.
	PruneAfter time.Duration
}

// DefaultSettings are the settings' defaults; Agent has none: it is the agent's own.
func DefaultSettings() Settings {
	return Settings{
		HeartbeatInterval: DefaultHeartbeatInterval,
		TTL:               DefaultTTL,
		Timeout:           DefaultTimeout,
		ResignTimeout:     DefaultResignTimeout,
		PruneInterval:     DefaultPruneInterval,
		PruneAfter:        DefaultPruneAfter,
	}
}

// Validate reports the first setting that is not valid (a *setting.Error, NotValid),
// naming it and the fix. It checks the agent's id and TTL, which every worker acting for
// the agent takes from these settings.
func (s Settings) Validate() error {
	switch {
	case s.Agent.ID == "":
		return setting.Invalid("Agent.ID", nil, "is empty: pass a name unique to this agent")
	case s.HeartbeatInterval <= 0:
		return setting.Invalid("HeartbeatInterval", s.HeartbeatInterval, "must be positive")
	case s.TTL < 2*s.HeartbeatInterval:
		return setting.Invalid("TTL", s.TTL, "must be at least twice %s, so that one late heartbeat does not make the agent look dead",
			setting.Ref{Name: "HeartbeatInterval", Value: s.HeartbeatInterval})
	case s.PruneAfter <= s.TTL:
		return setting.Invalid("TTL", s.TTL, "must be less than %s: agents silent that long are removed",
			setting.Ref{Name: "PruneAfter", Value: s.PruneAfter})
	case s.Timeout <= 0:
		return setting.Invalid("Timeout", s.Timeout, "must be positive")
	case s.ResignTimeout <= 0:
		return setting.Invalid("ResignTimeout", s.ResignTimeout, "must be positive")
	case s.PruneInterval <= 0:
		return setting.Invalid("PruneInterval", s.PruneInterval, "must be positive")
	}
	return nil
}
