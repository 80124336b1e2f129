package schemaguard

import (
	"time"

	"github.com/berth-dev/berth/internal/setting"
)

// DefaultTimeout bounds each check: reading the schema version is one short query.
const DefaultTimeout = 5 * time.Second

// Settings tune the worker. ManifoldConfig embeds them and hands them to Config whole, so
// that Validate is their one check.
type Settings struct {
	// Interval is the time between checks (the heartbeat interval): how long at most a
	// newer schema goes unnoticed by the workers, whose writes the store refuses meanwhile.
	Interval time.Duration
	// Timeout bounds each check.
	Timeout time.Duration
}

// DefaultSettings are the settings' defaults; Interval has none: it is the agent's
// heartbeat interval.
func DefaultSettings() Settings {
	return Settings{Timeout: DefaultTimeout}
}

// Validate reports the first setting that is not valid (a *setting.Error, NotValid),
// naming it.
func (s Settings) Validate() error {
	switch {
	case s.Interval <= 0:
		return setting.Invalid("Interval", s.Interval, "must be positive")
	case s.Timeout <= 0:
		return setting.Invalid("Timeout", s.Timeout, "must be positive")
	}
	return nil
}
