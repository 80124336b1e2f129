package leadership

import (
	"time"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/internal/setting"
)

// DefaultTimeout bounds each claim and the resignation: a claim is one short statement.
const DefaultTimeout = 5 * time.Second

// Settings tune the worker. ManifoldConfig embeds them and hands them to Config whole, so
// that Validate is their one check.
type Settings struct {
	// Agent is this agent: Agent.ID claims the lease, and a claim holds it for Agent.TTL
	// (the agent ttl).
	Agent domain.AgentIdentity
	// Interval is the time between claims (the heartbeat interval).
	Interval time.Duration
	// Timeout bounds each claim and the resignation.
	Timeout time.Duration
}

// DefaultSettings are the settings' defaults; Agent and Interval have none: they are the
// agent's own identity and heartbeat.
func DefaultSettings() Settings {
	return Settings{Timeout: DefaultTimeout}
}

// Validate reports the first setting that is not valid (NotValid, a *setting.Error for
// the settings besides Agent's own check), naming it.
func (s Settings) Validate() error {
	if err := s.Agent.Validate(); err != nil {
		return err
	}
	switch {
	case s.Interval <= 0:
		return setting.Invalid("Interval", s.Interval, "must be positive")
	case s.Agent.TTL < 2*s.Interval:
		return setting.Invalid("Agent.TTL", s.Agent.TTL, "must be at least twice %s", setting.Ref{Name: "Interval", Value: s.Interval})
	case s.Timeout <= 0:
		return setting.Invalid("Timeout", s.Timeout, "must be positive")
	}
	return nil
}
