package httpserver

import (
	"net"
	"time"

	"github.com/berth-dev/berth/internal/setting"
)

// The settings' defaults (the agent's flags start from them).
const (
	// DefaultAddr serves on the loopback interface only: the endpoints are unauthenticated.
	DefaultAddr = "127.0.0.1:9090"
	// DefaultShutdownTimeout bounds how long requests in flight may take to finish after
	// Kill: the endpoints answer in well under a second.
	DefaultShutdownTimeout = 5 * time.Second
)

// Settings tune the worker. ManifoldConfig embeds them and hands them to Config whole, so
// that Validate is their one check.
type Settings struct {
	Addr string // host:port to listen on; port 0 picks a free one (see Addr)
	// Required names the engine's manifolds that must be started for /readyz to answer 200.
	Required []string
	// ShutdownTimeout bounds how long requests in flight may take to finish after Kill.
	ShutdownTimeout time.Duration
	// Timeouts bound each connection; a zero field takes its default (DefaultTimeouts).
	Timeouts Timeouts
	// Profiling serves Go's profiles (net/http/pprof) under /debug/pprof/. Off by default:
	// they show the program's internals to whoever reaches the port. A CPU profile or trace
	// must be shorter than Timeouts.Handler (e.g. /debug/pprof/profile?seconds=20).
	Profiling bool
}

// DefaultSettings are the settings' defaults; Required has none: it names the manifolds of
// the engine the server reports on.
func DefaultSettings() Settings {
	return Settings{Addr: DefaultAddr, ShutdownTimeout: DefaultShutdownTimeout}
}

// Validate reports the first setting that is not valid (NotValid, a *setting.Error for
// the settings besides Timeouts), naming it and the fix.
func (s Settings) Validate() error {
	switch {
	case s.Addr == "":
		return setting.Invalid("Addr", nil, "is empty: pass --http-addr HOST:PORT, e.g. "+DefaultAddr)
	case !isHostPort(s.Addr):
		return setting.Invalid("Addr", s.Addr, "must be HOST:PORT, e.g. "+DefaultAddr)
	case len(s.Required) == 0:
		return setting.Invalid("Required", nil, "is empty: name the workers /readyz waits for")
	case s.ShutdownTimeout <= 0:
		return setting.Invalid("ShutdownTimeout", s.ShutdownTimeout, "must be positive")
	}
	return s.Timeouts.Validate()
}

func isHostPort(addr string) bool {
	_, _, err := net.SplitHostPort(addr)
	return err == nil
}
