package environcheck

import (
	"time"

	"github.com/berth-dev/berth/internal/setting"
)

// DefaultCheckTimeout bounds one environ's Check: a cluster's API answers well within a
// minute, or the check reports it unreachable.
const DefaultCheckTimeout = time.Minute

// Settings tune the worker. ManifoldConfig embeds them and hands them to Config whole, so
// that Validate is their one check.
type Settings struct {
	Interval     time.Duration // how often every environ is checked
	CheckTimeout time.Duration // bounds one environ's Check
}

// DefaultSettings are the settings' defaults; Interval has none: the agent checks environs
// as often as it checks resources (the health checker's Interval).
func DefaultSettings() Settings {
	return Settings{CheckTimeout: DefaultCheckTimeout}
}

// Validate reports the first setting that is not valid (a *setting.Error, NotValid),
// naming it.
func (s Settings) Validate() error {
	switch {
	case s.Interval <= 0:
		return setting.Invalid("Interval", s.Interval, "must be positive")
	case s.CheckTimeout <= 0:
		return setting.Invalid("CheckTimeout", s.CheckTimeout, "must be positive")
	}
	return nil
}
