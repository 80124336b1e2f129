package environ_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/environtest"
	"github.com/berth-dev/berth/environ/static"
)

// seedSet is the static provisioner of the provisioner set documentation, comments removed.
const seedSet = `{
  "static-example":
    {
      "type": "static",
      "spec":
        {
          "runtimes":
            [
              {
                "host": "http://localhost:9091",
                "slots": 50,
                "data_dir": "/mnt/data",
                "audience_url": "http://localhost:8081"
              }
            ]
        }
    }
}`

const staticSpec = `{"runtimes": [{"host": "http://localhost:9091", "slots": 2}]}`

// testRegistry registers static and "fake", whose environs it keeps by name with how often
// each was closed.
type testRegistry struct {
	*environ.Registry
	fakes  map[string]environ.Environ
	closed map[string]int
}

func newTestRegistry() *testRegistry {
	r := &testRegistry{Registry: environ.NewRegistry(), fakes: make(map[string]environ.Environ), closed: make(map[string]int)}
	r.Register(static.Type, static.New)
	r.Register("fake", func(name string, spec json.RawMessage, deps environ.Deps) (environ.Environ, error) {
		var s struct{ Fail, CloseErr string }
		if err := json.Unmarshal(spec, &s); err != nil {
			return nil, err
		}
		if s.Fail != "" {
			return nil, errors.New(s.Fail)
		}
		deps.Logger.Info("built")
		var closeErr error
		if s.CloseErr != "" {
			closeErr = errors.New(s.CloseErr)
		}
		f := &environtest.Environ{CloseFn: func() error { r.closed[name]++; return closeErr }}
		r.fakes[name] = f
		return f, nil
	})
	return r
}

func deps() environ.Deps {
	return environ.Deps{Slots: noSlots{}}
}

// noSlots is a slot store the registry tests never reach.
type noSlots struct{ domain.SlotStore }

func TestNewSetSeedExample(t *testing.T) {
	set, err := newTestRegistry().NewSet([]byte(seedSet), "", deps())
	if err != nil {
		t.Fatalf("NewSet(seed example): %v", err)
	}
	if set.Default != "static-example" {
		t.Errorf("default = %q, want the only provisioner, static-example", set.Default)
	}
	env, name, err := set.Get("")
	if err != nil || name != "static-example" || env.Type() != static.Type {
		t.Errorf("Get(\"\") = %v, %q, %v; want the static-example environ", env, name, err)
	}
	if spec := set.Specs["static-example"]; spec.Type != static.Type || !strings.Contains(string(spec.Spec), `"slots": 50`) {
		t.Errorf("Specs[static-example] = %s %s, want the seed's static spec", spec.Type, spec.Spec)
	}
	if err := set.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func TestNewSetDefault(t *testing.T) {
	twoSet := `{"pool": {"type": "static", "spec": ` + staticSpec + `}, "other": {"type": "fake", "spec": {}}}`
	tests := []struct {
		name, set, defaultName string
		want                   string // the default, or a part of the error
		fails                  bool
	}{{
		name: "single provisioner becomes the default",
		set:  `{"pool": {"type": "static", "spec": ` + staticSpec + `}}`, want: "pool",
	}, {
		name: "named default", set: twoSet, defaultName: "other", want: "other",
	}, {
		name: "several and no default", set: twoSet, fails: true,
		want: "no default provisioner: set BERTH_DEFAULT_PROVISIONER (or --default-provisioner) to one of other, pool",
	}, {
		name: "default not in the set", set: twoSet, defaultName: "nope", fails: true,
		want: `default provisioner "nope" is not in the provisioner set: use one of other, pool`,
	}, {
		name: "default not in a single set", set: `{"pool": {"type": "fake", "spec": {}}}`, defaultName: "nope", fails: true,
		want: `default provisioner "nope" is not in the provisioner set: use one of pool`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := newTestRegistry()
			set, err := reg.NewSet([]byte(tt.set), tt.defaultName, deps())
			if tt.fails {
				if err == nil || err.Error() != tt.want {
					t.Fatalf("NewSet = %v, want error %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewSet: %v", err)
			}
			defer set.Close()
			if set.Default != tt.want {
				t.Errorf("default = %q, want %q", set.Default, tt.want)
			}
			if _, name, err := set.Get(""); err != nil || name != tt.want {
				t.Errorf("Get(\"\") = %q, %v; want %q", name, err, tt.want)
			}
		})
	}
}

func TestNewSetErrors(t *testing.T) {
	tests := []struct {
		name, set string
		want      string // a part of the error
	}{
		{"no JSON", "  ", "provisioner set is empty"},
		{"empty object", `{}`, "provisioner set is empty"},
		{"null", `null`, "provisioner set is empty"},
		{"not an object", `["pool"]`, "not a JSON object"},
		{"name defined twice", `{"pool": {"type": "fake", "spec": {}}, "x": {"type": "fake", "spec": {}}, "pool": {"type": "static"}}`,
			`provisioner set, line 1, column 75: provisioner "pool" is defined twice`},
		{"empty name", `{" ": {"type": "fake", "spec": {}}}`, "empty name"},
		{"entry not an object", `{"pool": "static"}`, `provisioner "pool", line 1, column 10: want {"type": ..., "spec": {...}}`},
		{"unknown entry field", `{"pool": {"type": "static", "specs": {}}}`, `provisioner "pool", line 1, column 10: want {"type": ..., "spec": {...}}: json: unknown field "specs"`},
		{"missing type", `{"pool": {"spec": {}}}`, `provisioner "pool", line 1, column 10: field "type" is missing: use one of fake, static`},
		{"unknown type", `{"pool": {"type": "kubernetes", "spec": {}}}`, `provisioner "pool", line 1, column 19: type "kubernetes" is unknown: use one of fake, static`},
		{"bad static spec", `{"pool": {"type": "static", "spec": {"runtimes": [{"host": "http://a:9091", "slot": 2}]}}}`,
			`provisioner "pool" (static), line 1, column 85: runtimes[0].slot: unknown field; known: host, slots, data_dir, audience_url`},
		{"missing static spec", `{"pool": {"type": "static"}}`, `provisioner "pool" (static), line 1, column 10: spec: is missing`},
		{"syntax error", "{\n  \"pool\": {\"type\": \"static\",, }\n}", `provisioner set is not JSON (comments and trailing commas are allowed): line 2, column 29: invalid character ','`},
		{"comment not closed", "{\"pool\": /* the pool {}}", `provisioner set is not JSON (comments and trailing commas are allowed): line 1, column 10:`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set, err := newTestRegistry().NewSet([]byte(tt.set), "pool", deps())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewSet = %v, %v; want an error containing %q", set, err, tt.want)
			}
		})
	}
}

func TestNewSetClosesWhatItBuiltOnError(t *testing.T) {
	reg := newTestRegistry()
	// Provisioners are built in name order: a and b are built before c fails.
	_, err := reg.NewSet([]byte(`{
		"a": {"type": "fake", "spec": {}},
		"b": {"type": "fake", "spec": {}},
		"c": {"type": "fake", "spec": {"fail": "boom"}}}`), "a", deps())
	if err == nil || err.Error() != `provisioner "c" (fake), line 4, column 33: boom` {
		t.Fatalf("NewSet = %v, want the error of c", err)
	}
	for _, name := range []string{"a", "b"} {
		if f := reg.fakes[name]; f == nil || reg.closed[name] != 1 {
			t.Errorf("environ %s: built %v, closed %d times; want it built and closed once", name, f != nil, reg.closed[name])
		}
	}
}

func TestSetGetAndClose(t *testing.T) {
	reg := newTestRegistry()
	var logs bytes.Buffer
	d := deps()
	d.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	set, err := reg.NewSet([]byte(`{
		"pool": {"type": "static", "spec": `+staticSpec+`},
		"x": {"type": "fake", "spec": {"closeErr": "x is stuck"}},
		"y": {"type": "fake", "spec": {"closeErr": "y is stuck"}},
		"z": {"type": "fake", "spec": {}}}`), "z", d)
	if err != nil {
		t.Fatalf("NewSet: %v", err)
	}
	if got := strings.Join(set.Names(), ","); got != "pool,x,y,z" {
		t.Errorf("Names = %s, want pool,x,y,z", got)
	}
	for _, name := range []string{"x", "y", "z"} {
		if !strings.Contains(logs.String(), "msg=built provisioner="+name) {
			t.Errorf("logs %q: want a line tagged with provisioner %s", logs.String(), name)
		}
	}
	if env, name, err := set.Get(""); err != nil || name != "z" || env != reg.fakes["z"] {
		t.Errorf("Get(\"\") = %v, %q, %v; want z", env, name, err)
	}
	if env, name, err := set.Get("pool"); err != nil || name != "pool" || env.Type() != static.Type {
		t.Errorf("Get(pool) = %v, %q, %v; want the static pool", env, name, err)
	}
	if _, name, err := set.Get("nope"); err == nil || name != "nope" || err.Error() != `provisioner "nope" is not in the provisioner set (known: pool, x, y, z)` {
		t.Errorf("Get(nope) = %q, %v; want an error listing the known provisioners", name, err)
	}

	err = set.Close()
	if err == nil || err.Error() != `close provisioner "x": x is stuck` {
		t.Errorf("Close = %v, want the first error, x's", err)
	}
	for _, name := range []string{"x", "y", "z"} {
		if reg.closed[name] != 1 {
			t.Errorf("environ %s closed %d times, want 1", name, reg.closed[name])
		}
	}
}

func TestRegistry(t *testing.T) {
	reg := newTestRegistry()
	if got := strings.Join(reg.Types(), ","); got != "fake,static" {
		t.Errorf("Types = %s, want fake,static", got)
	}
	for name, register := range map[string]func(){
		"twice":     func() { reg.Register(static.Type, static.New) },
		"no type":   func() { reg.Register("", static.New) },
		"no initfn": func() { reg.Register("other", nil) },
	} {
		if !panics(register) {
			t.Errorf("Register %s did not panic", name)
		}
	}
}

func panics(f func()) (did bool) {
	defer func() { did = recover() != nil }()
	f()
	return false
}

// closeCounter is an environ that counts its Close calls.
type closeCounter struct {
	environ.Environ
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return c.Environ.Close() }

// FuzzNewSet feeds the provisioner-set decoder a set and a default name, with the static
// environ and "fake" registered. NewSet must answer every input without panicking; when it
// fails it has closed every environ it built; when it succeeds the set is whole (its default
// among its environs, one environ per spec, none closed) and encoding its specs again builds
// a set with the same digest.
func FuzzNewSet(f *testing.F) {
	for _, seed := range []struct{ set, defaultName string }{
		{seedSet, ""},
		{`{"pool": {"type": "static", "spec": ` + staticSpec + `}, "other": {"type": "fake", "spec": {}}}`, "other"},
		{`{"pool": {"type": "static", "spec": {"runtimes": [{"host": "HTTP://A:1/", "slots": 1000000}], "storage_bytes_per_slot": 9223372036854}}}`, "pool"},
		{`{"pool": {"type": "static", "spec": {"runtimes": [{"host": "http://a:1", "slots": 1e400}]}}}`, ""},
		{`{"pool": {"type": "static", "spec": {"runtimes": [{"host": "http://a:1", "slots": 1}], "storage_bytes_per_slot": 9223372036854775807}}}`, ""},
		{`{"pool": {"type": "fake", "spec": {}}, "x": {"type": "fake", "spec": {}}, "pool": {"type": "static"}}`, "pool"},
		{`{"\u0070ool": {"type": "fake", "spec": {}}, "pool": {"type": "fake", "spec": {}}}`, "pool"},
		{`{"a": {"type": "fake", "spec": {}}, "b": {"type": "fake", "spec": {}}, "c": {"type": "fake", "spec": {"fail": "boom"}}}`, "a"},
		{`{"pool": {"type": "kubernetes", "spec": {}}}`, ""},
		{`{"pool": {"type": "static", "specs": {}}}`, ""},
		{`[{"pool": {}}]`, ""},
		{"{\n  // the pool\n  \"pool\": {\"type\": \"static\", /* hosts */ \"spec\": {\"runtimes\": [{\"host\": \"http://a:1\", \"slots\": 0,},],},},\n}", ""},
	} {
		f.Add([]byte(seed.set), seed.defaultName)
	}
	f.Fuzz(func(t *testing.T, setJSON []byte, defaultName string) {
		var built []*closeCounter
		track := func(init environ.Initializer) environ.Initializer {
			return func(name string, spec json.RawMessage, deps environ.Deps) (environ.Environ, error) {
				env, err := init(name, spec, deps)
				if err != nil {
					return nil, err
				}
				c := &closeCounter{Environ: env}
				built = append(built, c)
				return c, nil
			}
		}
		newRegistry := func() *environ.Registry {
			reg := environ.NewRegistry()
			reg.Register(static.Type, track(static.New))
			reg.Register("fake", track(func(name string, spec json.RawMessage, deps environ.Deps) (environ.Environ, error) {
				var s struct{ Fail string }
				if err := json.Unmarshal(spec, &s); err != nil {
					return nil, err
				}
				if s.Fail != "" {
					return nil, errors.New(s.Fail)
				}
				return &environtest.Environ{}, nil
			}))
			return reg
		}

		set, err := newRegistry().NewSet(setJSON, defaultName, deps())
		if err != nil {
			if set != nil {
				t.Errorf("NewSet failed (%v) yet returned a set", err)
			}
			for _, env := range built {
				if env.closed != 1 {
					t.Errorf("NewSet failed (%v) and closed an environ it built %d times, want once", err, env.closed)
				}
			}
			return
		}
		if _, ok := set.Environs[set.Default]; !ok || (defaultName != "" && set.Default != defaultName) {
			t.Fatalf("default %q (asked for %q) is not one of %v", set.Default, defaultName, set.Names())
		}
		if len(set.Environs) != len(set.Specs) || len(built) != len(set.Specs) {
			t.Fatalf("set of %d specs has %d environs, %d built", len(set.Specs), len(set.Environs), len(built))
		}
		for _, env := range built {
			if env.closed != 0 {
				t.Fatalf("an environ of the set was closed")
			}
		}
		digest, err := set.Digest()
		if err != nil {
			t.Fatalf("Digest: %v", err)
		}
		if again, err := set.Digest(); err != nil || again != digest {
			t.Fatalf("Digest = %s then %s, %v; want it stable", digest, again, err)
		}
		encoded, err := json.Marshal(set.Specs)
		if err != nil {
			t.Fatalf("the specs of a valid set do not encode: %v", err)
		}
		rebuilt, err := newRegistry().NewSet(encoded, set.Default, deps())
		if err != nil {
			t.Fatalf("the set %s, encoded again as %s, is refused: %v", setJSON, encoded, err)
		}
		if got, err := rebuilt.Digest(); err != nil || got != digest {
			t.Fatalf("the set encoded again has digest %s, %v; want %s", got, err, digest)
		}
		if err := errors.Join(set.Close(), rebuilt.Close()); err != nil {
			t.Fatalf("Close: %v", err)
		}
		for _, env := range built {
			if env.closed != 1 {
				t.Fatalf("Close closed an environ %d times, want once", env.closed)
			}
		}
	})
}
