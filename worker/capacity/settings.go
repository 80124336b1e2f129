package capacity

import (
	"time"

	"github.com/berth-dev/berth/internal/setting"
)

// The settings' defaults (the agent's flags start from them).
const (
	// DefaultInterval is how often each environ's capacity is sampled.
	DefaultInterval = time.Minute
	// DefaultTimeout bounds one environ's Capacity call and the writes that follow.
	DefaultTimeout = 30 * time.Second
	// DefaultWarnTotal warns when 80% of a provisioner's usable capacity is used.
	DefaultWarnTotal = 0.8
	// DefaultWarnHost warns when every usable host is at least 70% full: below the total's
	// threshold, as a full host can refuse a resource the total has room for.
	DefaultWarnHost = 0.7
)

// Settings tune the worker. ManifoldConfig embeds them and hands them to Config whole, so
// that Validate is their one check.
type Settings struct {
	Interval   time.Duration // between samples
	Timeout    time.Duration // bounds one environ's Capacity call and the writes that follow
	Thresholds Thresholds
}

// DefaultSettings are the settings' defaults.
func DefaultSettings() Settings {
	return Settings{
		Interval:   DefaultInterval,
		Timeout:    DefaultTimeout,
		Thresholds: Thresholds{Total: DefaultWarnTotal, Host: DefaultWarnHost},
	}
}

// Validate reports the first setting that is not valid (a *setting.Error, NotValid),
// naming it.
func (s Settings) Validate() error {
	switch {
	case s.Interval <= 0:
		return setting.Invalid("Interval", s.Interval, "must be positive")
	case s.Timeout <= 0:
		return setting.Invalid("Timeout", s.Timeout, "must be positive")
	case !(s.Thresholds.Total > 0 && s.Thresholds.Total <= 1):
		return setting.Invalid("Thresholds.Total", s.Thresholds.Total, "must be a fraction in (0, 1], e.g. 0.8 for 80%%")
	case !(s.Thresholds.Host > 0 && s.Thresholds.Host <= 1):
		return setting.Invalid("Thresholds.Host", s.Thresholds.Host, "must be a fraction in (0, 1], e.g. 0.7 for 70%%")
	}
	return nil
}
