package static

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/berth-dev/berth/environ/internal/specjson"
	"net/url"
	"strings"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ/runtime"
)

// Per-slot sizing a spec gets when it leaves the field out (or sets it to 0): the sizing of a
// slot on a statically provisioned runtime host.
const (
	DefaultCPUPerSlot          = 1
	DefaultMemoryGBPerSlot     = 4
	DefaultStorageBytesPerSlot = int64(40) << 30 // 40 GiB
)

// Health probing a spec gets when it leaves the field out: GET host+DefaultHealthPath, with
// DefaultHealthTimeoutSeconds to answer.
const (
	DefaultHealthPath           = "/v1/ping"
	DefaultHealthTimeoutSeconds = 5
)

// Spec is the JSON spec of a static provisioner: a pool of pre-provisioned runtime hosts, each
// offering a number of slots, and what one slot is worth.
type Spec struct {
	Runtimes            []Runtime `json:"runtimes"`
	CPUPerSlot          int       `json:"cpu_per_slot"`
	MemoryGBPerSlot     int       `json:"memory_gb_per_slot"`
	StorageBytesPerSlot int64     `json:"storage_bytes_per_slot"`
	// HealthPath is probed on every host (GET host+path, any 2xx is healthy). An explicit ""
	// turns probing off: every host counts as up.
	HealthPath           string `json:"health_path"`
	HealthTimeoutSeconds int    `json:"health_timeout_seconds"`
}

// Runtime is one pre-provisioned runtime host of the pool.
type Runtime struct {
	Host        string `json:"host"`         // base URL clients reach the runtime at
	Slots       int    `json:"slots"`        // how many slots the host offers
	DataDir     string `json:"data_dir"`     // where the runtime keeps its data
	AudienceURL string `json:"audience_url"` // JWT audience; defaults to Host
}

// ParseSpec decodes raw strictly and validates it. Errors are *domain.FieldError naming the
// field (e.g. "runtimes[0].slots") and the fix. The returned spec has its defaults filled in
// (per-slot sizing, audience URLs) and every host in canonical form (lower-case scheme and
// host, no trailing slash), which is how reservations name hosts.
func ParseSpec(raw json.RawMessage) (*Spec, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return nil, &domain.FieldError{Field: "spec", Msg: `is missing: give at least {"runtimes": [{"host": "http://HOST:PORT", "slots": N}]}`}
	}
	spec := Spec{HealthPath: DefaultHealthPath}
	var runtimes []json.RawMessage
	if err := specjson.DecodeObject("spec", "", trimmed, []specjson.Field{
		{Name: "runtimes", Dst: &runtimes},
		{Name: "cpu_per_slot", Dst: &spec.CPUPerSlot},
		{Name: "memory_gb_per_slot", Dst: &spec.MemoryGBPerSlot},
		{Name: "storage_bytes_per_slot", Dst: &spec.StorageBytesPerSlot},
		{Name: "health_path", Dst: &spec.HealthPath},
		{Name: "health_timeout_seconds", Dst: &spec.HealthTimeoutSeconds},
	}); err != nil {
		return nil, err
	}
	spec.Runtimes = make([]Runtime, len(runtimes))
	for i, msg := range runtimes {
		rt := &spec.Runtimes[i]
		if err := specjson.DecodeObject(fmt.Sprintf("runtimes[%d]", i), fmt.Sprintf("runtimes[%d].", i), msg, []specjson.Field{
			{Name: "host", Dst: &rt.Host},
			{Name: "slots", Dst: &rt.Slots},
			{Name: "data_dir", Dst: &rt.DataDir},
			{Name: "audience_url", Dst: &rt.AudienceURL},
		}); err != nil {
			return nil, err
		}
	}
	if err := spec.validate(); err != nil {
		return nil, err
	}
	return &spec, nil
}

func (s *Spec) validate() error {
	if len(s.Runtimes) == 0 {
		return &domain.FieldError{Field: "runtimes", Msg: `must list at least one runtime host, e.g. [{"host": "http://HOST:PORT", "slots": N}]`}
	}
	seen := make(map[string]int, len(s.Runtimes))
	for i := range s.Runtimes {
		rt := &s.Runtimes[i]
		prefix := fmt.Sprintf("runtimes[%d].", i)
		if rt.Host == "" {
			return &domain.FieldError{Field: prefix + "host", Msg: "is required: the runtime's base URL, e.g. http://HOST:PORT"}
		}
		host, err := canonicalURL(rt.Host)
		if err != nil {
			return &domain.FieldError{Field: prefix + "host", Msg: err.Error()}
		}
		if first, dup := seen[host]; dup {
			return &domain.FieldError{
				Field: prefix + "host",
				Msg:   fmt.Sprintf("%q duplicates runtimes[%d].host; each host may appear once", rt.Host, first),
			}
		}
		seen[host] = i
		rt.Host = host
		if rt.Slots < 1 {
			return &domain.FieldError{Field: prefix + "slots", Msg: fmt.Sprintf("must be at least 1 (the host's capacity in slots), got %d", rt.Slots)}
		}
		if rt.Slots > runtime.MaxSlots {
			return &domain.FieldError{Field: prefix + "slots", Msg: fmt.Sprintf("must be at most %d (the host's capacity in slots), got %d", runtime.MaxSlots, rt.Slots)}
		}
		if rt.AudienceURL == "" {
			rt.AudienceURL = rt.Host
		} else if _, err := canonicalURL(rt.AudienceURL); err != nil {
			return &domain.FieldError{Field: prefix + "audience_url", Msg: err.Error() + "; or leave it out to use the host"}
		}
	}
	if err := sizing("cpu_per_slot", &s.CPUPerSlot, DefaultCPUPerSlot); err != nil {
		return err
	}
	if err := sizing("memory_gb_per_slot", &s.MemoryGBPerSlot, DefaultMemoryGBPerSlot); err != nil {
		return err
	}
	if err := sizing("storage_bytes_per_slot", &s.StorageBytesPerSlot, DefaultStorageBytesPerSlot); err != nil {
		return err
	}
	if err := s.sizesFit(); err != nil {
		return err
	}
	if s.HealthPath != "" && !strings.HasPrefix(s.HealthPath, "/") {
		return &domain.FieldError{Field: "health_path", Msg: fmt.Sprintf("must start with /, got %q (e.g. %q); or \"\" to turn health probes off", s.HealthPath, DefaultHealthPath)}
	}
	return sizing("health_timeout_seconds", &s.HealthTimeoutSeconds, DefaultHealthTimeoutSeconds)
}

// sizesFit checks that a runtime as large as the largest host (no reservation on a configured
// host is larger) gets sizes that fit an int64: per-slot sizing times slots never overflows.
func (s *Spec) sizesFit() error {
	largest := 0
	for i, rt := range s.Runtimes {
		if rt.Slots > s.Runtimes[largest].Slots {
			largest = i
		}
	}
	slots := s.Runtimes[largest].Slots
	for _, size := range []struct {
		name    string
		perSlot int64
	}{
		{"cpu_per_slot", int64(s.CPUPerSlot)},
		{"memory_gb_per_slot", int64(s.MemoryGBPerSlot)},
		{"storage_bytes_per_slot", s.StorageBytesPerSlot},
	} {
		if _, err := runtime.SlotSize(size.name, size.perSlot, slots); err != nil {
			var fe *domain.FieldError
			if errors.As(err, &fe) {
				fe.Msg += fmt.Sprintf(" (runtimes[%d].slots)", largest)
			}
			return err
		}
	}
	return nil
}

// runtime returns the configured runtime of canonical host, if any.
func (s *Spec) runtime(host string) (Runtime, bool) {
	for _, rt := range s.Runtimes {
		if rt.Host == host {
			return rt, true
		}
	}
	return Runtime{}, false
}

func sizing[T int | int64](name string, v *T, def T) error {
	switch {
	case *v < 0:
		return &domain.FieldError{Field: name, Msg: fmt.Sprintf("must not be negative, got %d; leave it out (or 0) for the default of %d", *v, def)}
	case *v == 0:
		*v = def
	}
	return nil
}

// canonicalURL checks that s is an absolute http(s) URL and returns it with scheme and host
// in lower case and no trailing slash, so that spellings of one host compare equal.
func canonicalURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		shown := s
		if err == nil {
			shown = u.Redacted()
		}
		return "", fmt.Errorf("%q is not an absolute http(s) URL: write it as http://HOST:PORT or https://HOST", shown)
	}
	if u.User != nil {
		return "", fmt.Errorf("must not carry credentials: give the URL without user:password@")
	}
	u.Scheme = strings.ToLower(u.Scheme)
	u.Host = strings.ToLower(u.Host)
	return strings.TrimRight(u.String(), "/"), nil
}

func containsString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
