package database

import (
	"time"

	"github.com/berth-dev/berth/internal/setting"
)

// The settings' defaults.
const (
	// DefaultConnectTimeout bounds connecting and migrating at start: a migration of a large
	// table takes a while.
	DefaultConnectTimeout = 30 * time.Second
	// DefaultPingInterval is the time between pings of the store.
	DefaultPingInterval = 5 * time.Second
	// DefaultPingTimeout bounds one ping.
	DefaultPingTimeout = 5 * time.Second
	// DefaultMaxPingFailures gives the connection up after 3 failed pings in a row (15
	// seconds): one lost packet does not bounce every worker.
	DefaultMaxPingFailures = 3
)

// Settings tune the worker. ManifoldConfig embeds them and hands them to Config whole, so
// that Validate is their one check.
type Settings struct {
	URL             string        // the store to open; it may hold a password
	ConnectTimeout  time.Duration // for connecting and migrating at start
	PingInterval    time.Duration
	PingTimeout     time.Duration
	MaxPingFailures int // consecutive failed pings before the worker gives up the connection
}

// DefaultSettings are the settings' defaults; URL has none.
func DefaultSettings() Settings {
	return Settings{
		ConnectTimeout:  DefaultConnectTimeout,
		PingInterval:    DefaultPingInterval,
		PingTimeout:     DefaultPingTimeout,
		MaxPingFailures: DefaultMaxPingFailures,
	}
}

// Validate reports the first setting that is not valid (a *setting.Error, NotValid),
// naming it. It never shows the URL, which may hold a password.
func (s Settings) Validate() error {
	switch {
	case s.URL == "":
		return setting.Invalid("URL", nil, "is empty: pass --database-url or BERTH_DATABASE_URL")
	case s.ConnectTimeout <= 0:
		return setting.Invalid("ConnectTimeout", s.ConnectTimeout, "must be positive")
	case s.PingInterval <= 0:
		return setting.Invalid("PingInterval", s.PingInterval, "must be positive")
	case s.PingTimeout <= 0:
		return setting.Invalid("PingTimeout", s.PingTimeout, "must be positive")
	case s.MaxPingFailures < 1:
		return setting.Invalid("MaxPingFailures", s.MaxPingFailures, "must be at least 1")
	}
	return nil
}
