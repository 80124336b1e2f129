package static

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/berth-dev/berth/domain"
)

// seedExample is the static provisioner of the provisioner set documentation, comments removed.
const seedExample = `{
  "runtimes":
    [
      {
        "host": "http://localhost:9091",
        "slots": 50,
        "data_dir": "/mnt/data",
        "audience_url": "http://localhost:8081"
      }
    ]
}`

func TestParseSpecSeedExample(t *testing.T) {
	spec, err := ParseSpec(json.RawMessage(seedExample))
	if err != nil {
		t.Fatalf("ParseSpec(seed example): %v", err)
	}
	want := Spec{
		Runtimes: []Runtime{{
			Host:        "http://localhost:9091",
			Slots:       50,
			DataDir:     "/mnt/data",
			AudienceURL: "http://localhost:8081",
		}},
		CPUPerSlot:           1,
		MemoryGBPerSlot:      4,
		StorageBytesPerSlot:  40 << 30,
		HealthPath:           "/v1/ping",
		HealthTimeoutSeconds: 5,
	}
	if !equalSpec(*spec, want) {
		t.Errorf("ParseSpec(seed example) = %+v, want %+v", *spec, want)
	}
}

func TestParseSpecCanonicalisesAndDefaults(t *testing.T) {
	spec, err := ParseSpec(json.RawMessage(`{
		"runtimes": [
			{"host": "HTTP://Node-A.Example:9091/", "slots": 3},
			{"host": "https://b.example/rt/", "slots": 1, "audience_url": "https://aud.example"}
		],
		"cpu_per_slot": 2, "memory_gb_per_slot": 8, "storage_bytes_per_slot": 1000,
		"health_path": "/healthz", "health_timeout_seconds": 2
	}`))
	if err != nil {
		t.Fatalf("ParseSpec: %v", err)
	}
	want := Spec{
		Runtimes: []Runtime{
			{Host: "http://node-a.example:9091", Slots: 3, AudienceURL: "http://node-a.example:9091"},
			{Host: "https://b.example/rt", Slots: 1, AudienceURL: "https://aud.example"},
		},
		CPUPerSlot:           2,
		MemoryGBPerSlot:      8,
		StorageBytesPerSlot:  1000,
		HealthPath:           "/healthz",
		HealthTimeoutSeconds: 2,
	}
	if !equalSpec(*spec, want) {
		t.Errorf("ParseSpec = %+v, want %+v", *spec, want)
	}
}

func TestParseSpecErrors(t *testing.T) {
	tests := []struct {
		name  string
		spec  string
		field string // the *domain.FieldError's Field
		want  string // the whole message, or a part of it when partial
		exact bool
	}{{
		name: "missing", spec: ``, field: "spec", want: "is missing",
	}, {
		name: "null", spec: `null`, field: "spec", want: "is missing",
	}, {
		name: "not an object", spec: `[1]`, field: "spec", want: "must be a JSON object",
	}, {
		name: "unknown top-level field", spec: `{"runtimes": [{"host": "http://a:1", "slots": 1}], "cpus": 2}`,
		field: "cpus", want: "cpus: unknown field; known: runtimes, cpu_per_slot, memory_gb_per_slot, storage_bytes_per_slot, health_path, health_timeout_seconds", exact: true,
	}, {
		name: "unknown runtime field", spec: `{"runtimes": [{"host": "http://a:9091", "slot": 2}]}`,
		field: "runtimes[0].slot", want: "runtimes[0].slot: unknown field; known: host, slots, data_dir, audience_url", exact: true,
	}, {
		name: "runtimes not a list", spec: `{"runtimes": {"host": "http://a:1"}}`, field: "runtimes", want: "must be a list",
	}, {
		name: "runtime not an object", spec: `{"runtimes": ["http://a:1"]}`, field: "runtimes[0]", want: "must be a JSON object",
	}, {
		name: "no runtimes", spec: `{}`, field: "runtimes", want: "at least one runtime",
	}, {
		name: "empty runtimes", spec: `{"runtimes": []}`, field: "runtimes", want: "at least one runtime",
	}, {
		name: "host missing", spec: `{"runtimes": [{"slots": 1}]}`, field: "runtimes[0].host", want: "is required",
	}, {
		name: "host not a string", spec: `{"runtimes": [{"host": 9091, "slots": 1}]}`, field: "runtimes[0].host", want: "must be a string, got 9091",
	}, {
		name: "host relative", spec: `{"runtimes": [{"host": "localhost:9091", "slots": 1}]}`,
		field: "runtimes[0].host", want: "not an absolute http(s) URL",
	}, {
		name: "host not http", spec: `{"runtimes": [{"host": "grpc://a:9091", "slots": 1}]}`,
		field: "runtimes[0].host", want: "not an absolute http(s) URL",
	}, {
		name: "host with credentials", spec: `{"runtimes": [{"host": "http://u:hunter2@a:9091", "slots": 1}]}`,
		field: "runtimes[0].host", want: "must not carry credentials",
	}, {
		name: "credentials in a non-http URL", spec: `{"runtimes": [{"host": "ftp://u:hunter2@a:21", "slots": 1}]}`,
		field: "runtimes[0].host", want: "not an absolute http(s) URL",
	}, {
		name: "duplicate host", spec: `{"runtimes": [
			{"host": "http://a:9091", "slots": 1}, {"host": "http://b:9091", "slots": 1}, {"host": "HTTP://A:9091/", "slots": 1}]}`,
		field: "runtimes[2].host",
		want:  `runtimes[2].host: "HTTP://A:9091/" duplicates runtimes[0].host; each host may appear once`, exact: true,
	}, {
		name: "slots missing", spec: `{"runtimes": [{"host": "http://a:9091"}]}`, field: "runtimes[0].slots", want: "must be at least 1",
	}, {
		name: "slots negative", spec: `{"runtimes": [{"host": "http://a:9091", "slots": -2}]}`, field: "runtimes[0].slots", want: "got -2",
	}, {
		name: "slots fraction", spec: `{"runtimes": [{"host": "http://a:9091", "slots": 1.5}]}`, field: "runtimes[0].slots", want: "must be a whole number, got 1.5",
	}, {
		name: "slots string", spec: `{"runtimes": [{"host": "http://a:9091", "slots": "10"}]}`, field: "runtimes[0].slots", want: "must be a whole number",
	}, {
		name: "slots beyond the bound", spec: `{"runtimes": [{"host": "http://a:9091", "slots": 2147483648}]}`,
		field: "runtimes[0].slots", want: "runtimes[0].slots: must be at most 1000000 (the host's capacity in slots), got 2147483648", exact: true,
	}, {
		name:  "storage per slot overflows on the largest host",
		spec:  `{"runtimes": [{"host": "http://a:9091", "slots": 2}, {"host": "http://b:9091", "slots": 50}], "storage_bytes_per_slot": 9223372036854775807}`,
		field: "storage_bytes_per_slot", exact: true,
		want: "storage_bytes_per_slot: 9223372036854775807 per slot times 50 slots is more than a 64-bit size holds: at most 184467440737095516 per slot fits 50 slots (runtimes[1].slots)",
	}, {
		name: "cpu per slot overflows", spec: `{"runtimes": [{"host": "http://a:9091", "slots": 1000000}], "cpu_per_slot": 9223372036854776}`,
		field: "cpu_per_slot", want: "at most 9223372036854 per slot fits 1000000 slots (runtimes[0].slots)",
	}, {
		name: "second runtime bad", spec: `{"runtimes": [{"host": "http://a:9091", "slots": 1}, {"host": "http://b:9091", "slots": 0}]}`,
		field: "runtimes[1].slots", want: "must be at least 1",
	}, {
		name: "audience not a URL", spec: `{"runtimes": [{"host": "http://a:9091", "slots": 1, "audience_url": "aud"}]}`,
		field: "runtimes[0].audience_url", want: "leave it out to use the host",
	}, {
		name: "cpu negative", spec: `{"runtimes": [{"host": "http://a:9091", "slots": 1}], "cpu_per_slot": -1}`,
		field: "cpu_per_slot", want: "must not be negative, got -1; leave it out (or 0) for the default of 1",
	}, {
		name: "memory negative", spec: `{"runtimes": [{"host": "http://a:9091", "slots": 1}], "memory_gb_per_slot": -4}`,
		field: "memory_gb_per_slot", want: "must not be negative",
	}, {
		name: "storage negative", spec: `{"runtimes": [{"host": "http://a:9091", "slots": 1}], "storage_bytes_per_slot": -1}`,
		field: "storage_bytes_per_slot", want: "must not be negative",
	}, {
		name: "health path relative", spec: `{"runtimes": [{"host": "http://a:9091", "slots": 1}], "health_path": "ping"}`,
		field: "health_path", want: `must start with /, got "ping"`,
	}, {
		name: "health timeout negative", spec: `{"runtimes": [{"host": "http://a:9091", "slots": 1}], "health_timeout_seconds": -5}`,
		field: "health_timeout_seconds", want: "must not be negative",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, err := ParseSpec(json.RawMessage(tt.spec))
			if err == nil {
				t.Fatalf("ParseSpec(%s) = %+v, want an error", tt.spec, spec)
			}
			var fe *domain.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %q is %T, want *domain.FieldError", err, err)
			}
			if fe.Field != tt.field {
				t.Errorf("error %q names field %q, want %q", err, fe.Field, tt.field)
			}
			if tt.exact && err.Error() != tt.want {
				t.Errorf("error = %q, want %q", err, tt.want)
			}
			if !tt.exact && !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error = %q, want it to contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q shows a password", err)
			}
		})
	}
}

func equalSpec(a, b Spec) bool {
	if len(a.Runtimes) != len(b.Runtimes) {
		return false
	}
	for i := range a.Runtimes {
		if a.Runtimes[i] != b.Runtimes[i] {
			return false
		}
	}
	return a.CPUPerSlot == b.CPUPerSlot && a.MemoryGBPerSlot == b.MemoryGBPerSlot && a.StorageBytesPerSlot == b.StorageBytesPerSlot &&
		a.HealthPath == b.HealthPath && a.HealthTimeoutSeconds == b.HealthTimeoutSeconds
}

func TestParseSpecHealthPathOff(t *testing.T) {
	spec, err := ParseSpec(json.RawMessage(`{"runtimes": [{"host": "http://a:9091", "slots": 1}], "health_path": ""}`))
	if err != nil || spec.HealthPath != "" {
		t.Errorf("ParseSpec with health_path \"\" = %+v, %v; want probing off", spec, err)
	}
}
