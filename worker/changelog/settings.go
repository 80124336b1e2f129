package changelog

import (
	"time"

	"github.com/berth-dev/berth/internal/setting"
)

// The settings' defaults (the agent's flags start from them).
const (
	// DefaultInterval is the time between prunes: the tables grow little in ten minutes.
	DefaultInterval = 10 * time.Minute
	// DefaultRetain keeps a day of change-log entries, far more than a watcher that fell
	// behind needs to catch up.
	DefaultRetain = 24 * time.Hour
	// DefaultHistoryRetain keeps a week of resource events and capacity samples.
	DefaultHistoryRetain = 7 * 24 * time.Hour
)

// Settings tune the worker. ManifoldConfig embeds them and hands them to Config whole, so
// that Validate is their one check.
type Settings struct {
	// Interval is the time between prunes.
	Interval time.Duration
	// Retain is how long a change-log entry is kept.
	Retain time.Duration
	// HistoryRetain is how long resource events and capacity samples are kept.
	HistoryRetain time.Duration
}

// DefaultSettings are the settings' defaults.
func DefaultSettings() Settings {
	return Settings{Interval: DefaultInterval, Retain: DefaultRetain, HistoryRetain: DefaultHistoryRetain}
}

// Validate reports the first setting that is not valid (a *setting.Error, NotValid),
// naming it.
func (s Settings) Validate() error {
	switch {
	case s.Interval <= 0:
		return setting.Invalid("Interval", s.Interval, "must be positive")
	case s.Retain <= 0:
		return setting.Invalid("Retain", s.Retain, "must be positive")
	case s.HistoryRetain <= 0:
		return setting.Invalid("HistoryRetain", s.HistoryRetain, "must be positive")
	}
	return nil
}
