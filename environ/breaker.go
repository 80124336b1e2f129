package environ

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/berth-dev/berth/domain"
)

// BreakerSpec is the optional "breaker" of a provisioner set entry, beside its type and
// spec: when the provisioner's circuit breaker opens and for how long. A field left out
// keeps its default (domain.DefaultBreakerSettings); "enabled": false turns the breaker
// off, so that the provisioner's broker is called whatever it answers.
//
//	"breaker": {"failures": 5, "window": "30s", "open_for": "10s", "max_open_for": "5m"}
type BreakerSpec struct {
	Enabled    *bool    `json:"enabled,omitempty"`
	Failures   *int     `json:"failures,omitempty"`
	Window     Duration `json:"window,omitempty"`
	OpenFor    Duration `json:"open_for,omitempty"`
	MaxOpenFor Duration `json:"max_open_for,omitempty"`
}

// Duration is a duration written as a Go duration string ("30s", "5m").
type Duration struct {
	time.Duration
	set bool
}

// UnmarshalJSON reads a duration string.
func (d *Duration) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("want a duration such as \"30s\", got %s", bytes.TrimSpace(data))
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration such as \"30s\", got %q", s)
	}
	d.Duration, d.set = v, true
	return nil
}

// MarshalJSON writes the duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.Duration.String()) }

// IsZero says the duration was not given, for omitempty.
func (d Duration) IsZero() bool { return !d.set }

// Settings are the breaker's settings, the defaults filled in, and whether it is enabled;
// a setting that cannot work is a *domain.FieldError naming it (e.g. "breaker.window") and
// the fix.
func (b *BreakerSpec) Settings() (domain.BreakerSettings, bool, error) {
	s := domain.DefaultBreakerSettings()
	if b == nil {
		return s, true, nil
	}
	if b.Failures != nil {
		s.Failures = *b.Failures
	}
	if b.Window.set {
		s.Window = b.Window.Duration
	}
	if b.OpenFor.set {
		s.OpenFor = b.OpenFor.Duration
		if !b.MaxOpenFor.set {
			s.MaxOpenFor = max(s.MaxOpenFor, s.OpenFor)
		}
	}
	if b.MaxOpenFor.set {
		s.MaxOpenFor = b.MaxOpenFor.Duration
	}
	enabled := b.Enabled == nil || *b.Enabled
	switch {
	case s.Failures < 1:
		return s, enabled, &domain.FieldError{Field: "breaker.failures", Msg: fmt.Sprintf("is %d: give how many failures within the window open the breaker, at least 1 (or \"enabled\": false to turn it off)", s.Failures)}
	case s.Window <= 0:
		return s, enabled, &domain.FieldError{Field: "breaker.window", Msg: fmt.Sprintf("is %s: give a positive duration, e.g. \"30s\"", s.Window)}
	case s.OpenFor <= 0:
		return s, enabled, &domain.FieldError{Field: "breaker.open_for", Msg: fmt.Sprintf("is %s: give a positive duration, e.g. \"10s\"", s.OpenFor)}
	case s.MaxOpenFor < s.OpenFor:
		return s, enabled, &domain.FieldError{Field: "breaker.max_open_for", Msg: fmt.Sprintf("is %s: give at least open_for (%s)", s.MaxOpenFor, s.OpenFor)}
	}
	return s, enabled, nil
}

// Breaker returns the breaker settings of provisioner name ("" is the default) and whether
// its breaker is enabled. A provisioner whose entry sets none, and one a set built by hand
// does not know, gets the defaults; a set the registry built has checked every entry's.
func (s *Set) Breaker(name string) (domain.BreakerSettings, bool) {
	if name == "" {
		name = s.Default
	}
	settings, enabled, err := s.Specs[name].Breaker.Settings()
	if err != nil {
		return domain.DefaultBreakerSettings(), true
	}
	return settings, enabled
}

// breakerField is the JSON pointer tokens, from the set's top, of the breaker setting err
// (a *domain.FieldError of Settings) names, for provisioner name.
func breakerField(name string, err error) []string {
	tokens := []string{name, "breaker"}
	var fe *domain.FieldError
	if !errors.As(err, &fe) {
		return tokens
	}
	return append([]string{name}, fieldPathToken.FindAllString(fe.Field, -1)...)
}
