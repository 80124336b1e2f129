package provisionerset

import (
	"time"

	"github.com/berth-dev/berth/internal/setting"
)

// DefaultDebounce is long enough for an editor's save (a burst of events), short enough
// for a reload to feel immediate.
const DefaultDebounce = 500 * time.Millisecond

// Settings say where the set comes from and how it is reloaded. ManifoldConfig embeds them
// and hands them to Config whole, so that Validate is their one check.
type Settings struct {
	// Initial is the set the agent started with; it must build.
	Initial []byte
	// Origin says where the set comes from in logs and errors ("file PATH", or the
	// environment variable's name).
	Origin string
	// Path is the file the set is read from on a reload; empty when the set came from the
	// environment, which cannot change while the agent runs.
	Path string
	// Default names the default provisioner, which every accepted set must contain.
	Default string
	// Debounce is how long the file must be quiet after a change before it is read.
	Debounce time.Duration
}

// DefaultSettings are the settings' defaults; the set and where it comes from have none.
func DefaultSettings() Settings {
	return Settings{Debounce: DefaultDebounce}
}

// Validate reports the first setting that is not valid (a *setting.Error, NotValid),
// naming it.
func (s Settings) Validate() error {
	switch {
	case len(s.Initial) == 0:
		return setting.Invalid("Initial", nil, "is empty: pass --provisioners FILE or BERTH_PROVISIONER_SET_JSON")
	case s.Origin == "":
		return setting.Invalid("Origin", nil, "is empty: say where the set comes from")
	case s.Debounce <= 0:
		return setting.Invalid("Debounce", s.Debounce, "must be positive")
	}
	return nil
}
