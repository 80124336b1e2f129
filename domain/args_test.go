package domain_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/berth-dev/berth/domain"
)

// expectFieldError checks err is a *domain.FieldError on field whose message mentions hint.
func expectFieldError(t *testing.T, err error, field, hint string) {
	t.Helper()
	var fe *domain.FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("err = %v, want a field error on %s", err, field)
	}
	if fe.Field != field || !strings.Contains(fe.Msg, hint) {
		t.Fatalf("err = %q, want field %s and a message mentioning %q", err, field, hint)
	}
	if !strings.HasPrefix(err.Error(), field+": ") {
		t.Fatalf("err = %q does not start with the field name", err)
	}
}

func TestNewRuntimeArgs(t *testing.T) {
	for _, tc := range []struct {
		args map[string]any
		want domain.RuntimeArgs
	}{
		{nil, domain.RuntimeArgs{Slots: domain.DefaultRuntimeSlots}},
		{map[string]any{"slots": float64(3)}, domain.RuntimeArgs{Slots: 3}},
		{map[string]any{"slots": json.Number("4"), "version": "1.2"}, domain.RuntimeArgs{Slots: 4, Version: "1.2"}},
		{map[string]any{"slots": int64(2)}, domain.RuntimeArgs{Slots: 2}},
	} {
		got, err := domain.NewRuntimeArgs(tc.args)
		if err != nil || *got != tc.want {
			t.Errorf("NewRuntimeArgs(%v) = %+v, %v; want %+v", tc.args, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		args        map[string]any
		field, hint string
	}{
		{map[string]any{"slots": 1, "size": 2}, "args.size", "known keys: slots, version"},
		{map[string]any{"zz": 1, "aa": 2}, "args.aa", "unknown key"},
		{map[string]any{"slots": 0}, "args.slots", "at least 1"},
		{map[string]any{"slots": 2.5}, "args.slots", "whole number"},
		{map[string]any{"slots": json.Number("2.5")}, "args.slots", "whole number"},
		{map[string]any{"slots": "2"}, "args.slots", `the string "2"`},
		{map[string]any{"slots": 1e12}, "args.slots", "whole number"},
		{map[string]any{"version": 7.0}, "args.version", "must be a string"},
		{map[string]any{"version": map[string]any{}}, "args.version", "an object"},
	} {
		_, err := domain.NewRuntimeArgs(tc.args)
		expectFieldError(t, err, tc.field, tc.hint)
	}
}

func TestRuntimeArgsRoundTrip(t *testing.T) {
	for _, args := range []domain.RuntimeArgs{{Slots: 1}, {Slots: 3, Version: "2.0"}} {
		raw, err := json.Marshal(args.AsMap())
		if err != nil {
			t.Fatal(err)
		}
		var stored map[string]any
		if err := json.Unmarshal(raw, &stored); err != nil {
			t.Fatal(err)
		}
		got, err := domain.NewRuntimeArgs(stored)
		if err != nil || *got != args {
			t.Errorf("round trip of %+v = %+v, %v", args, got, err)
		}
	}
}

func TestClickhouseArgsTakeNoKeys(t *testing.T) {
	if _, err := domain.NewClickhouseArgs(map[string]any{}); err != nil {
		t.Fatalf("empty args: %v", err)
	}
	_, err := domain.NewClickhouseArgs(map[string]any{"slots": 1})
	expectFieldError(t, err, "args.slots", "it takes no keys")
}

func TestValidateArgs(t *testing.T) {
	if err := domain.ValidateArgs(domain.ResourceTypeRuntime, map[string]any{"slots": 2}); err != nil {
		t.Errorf("valid runtime args: %v", err)
	}
	expectFieldError(t, domain.ValidateArgs(domain.ResourceTypeRuntime, map[string]any{"cpu": 2}), "args.cpu", "unknown key")
	expectFieldError(t, domain.ValidateArgs(domain.ResourceTypeClickHouse, map[string]any{"cpu": 2}), "args.cpu", "no keys")
	err := domain.ValidateArgs("vm", nil)
	if err == nil || !strings.Contains(err.Error(), `"vm"`) || !strings.Contains(err.Error(), "runtime, clickhouse") {
		t.Errorf("unknown type: err = %v, want it named with the valid types", err)
	}
}

func TestRuntimeConfig(t *testing.T) {
	want := domain.RuntimeConfig{Host: "h1", Audience: "a", CPU: 2, MemoryGB: 4, StorageBytes: 1 << 30}
	raw, err := json.Marshal(want.AsMap())
	if err != nil {
		t.Fatal(err)
	}
	var stored map[string]any
	if err := json.Unmarshal(raw, &stored); err != nil {
		t.Fatal(err)
	}
	got, err := domain.NewRuntimeConfig(stored)
	if err != nil || *got != want {
		t.Fatalf("round trip = %+v, %v; want %+v", got, err, want)
	}
	for _, tc := range []struct {
		cfg         map[string]any
		field, hint string
	}{
		{map[string]any{"port": 1}, "config.port", "known keys"},
		{map[string]any{"host": 1.0}, "config.host", "must be a string"},
		{map[string]any{"audience": true}, "config.audience", "the boolean true"},
		{map[string]any{"cpu": "2"}, "config.cpu", "whole number"},
		{map[string]any{"memory_gb": 1.5}, "config.memory_gb", "whole number"},
		{map[string]any{"storage_bytes": []any{}}, "config.storage_bytes", "a list"},
	} {
		_, err := domain.NewRuntimeConfig(tc.cfg)
		expectFieldError(t, err, tc.field, tc.hint)
	}
}

func TestClickhouseConfig(t *testing.T) {
	stored := map[string]any{
		"dsn":                       "clickhouse://default@h:9000/default",
		"password_secret_namespace": "ns",
		"password_secret_name":      "ch-1-auth",
		"password_secret_key":       "password",
	}
	got, err := domain.NewClickhouseConfig(stored)
	want := &domain.ClickhouseConfig{DSN: "clickhouse://default@h:9000/default", PasswordSecretNamespace: "ns", PasswordSecretName: "ch-1-auth", PasswordSecretKey: "password"}
	if err != nil || !reflect.DeepEqual(got, want) || !reflect.DeepEqual(got.AsMap(), stored) {
		t.Fatalf("config = %+v, %v", got, err)
	}
	_, err = domain.NewClickhouseConfig(map[string]any{"dsn": nil, "user": "x"})
	expectFieldError(t, err, "config.user", "known keys: dsn, password_secret_namespace")
	_, err = domain.NewClickhouseConfig(map[string]any{"dsn": 3.0})
	expectFieldError(t, err, "config.dsn", "must be a string")
	_, err = domain.NewClickhouseConfig(map[string]any{"password_secret_name": true})
	expectFieldError(t, err, "config.password_secret_name", "must be a string")
}

func TestParseArgFlags(t *testing.T) {
	got, err := domain.ParseArgFlags(domain.ResourceTypeRuntime, []string{"slots=3", " version =v2"})
	if err != nil || !reflect.DeepEqual(got, map[string]any{"slots": int64(3), "version": "v2"}) {
		t.Fatalf("parse = %#v, %v", got, err)
	}
	if got, err := domain.ParseArgFlags(domain.ResourceTypeClickHouse, nil); err != nil || len(got) != 0 {
		t.Fatalf("no flags = %#v, %v; want empty args", got, err)
	}
	for _, tc := range []struct {
		t           domain.ResourceType
		pairs       []string
		field, hint string
	}{
		{domain.ResourceTypeRuntime, []string{"slots"}, "--arg", "not key=value"},
		{domain.ResourceTypeRuntime, []string{"=3"}, "--arg", "not key=value"},
		{domain.ResourceTypeRuntime, []string{"slots=many"}, "args.slots", `the string "many"`},
		{domain.ResourceTypeRuntime, []string{"slots=1.5"}, "args.slots", "whole number"},
		{domain.ResourceTypeRuntime, []string{"slots=0"}, "args.slots", "at least 1"},
		{domain.ResourceTypeRuntime, []string{"colour=red"}, "args.colour", "unknown key"},
		{domain.ResourceTypeClickHouse, []string{"slots=1"}, "args.slots", "no keys"},
	} {
		_, err := domain.ParseArgFlags(tc.t, tc.pairs)
		expectFieldError(t, err, tc.field, tc.hint)
	}
}

func TestParseResourceType(t *testing.T) {
	for _, rt := range domain.ResourceTypes {
		if got, err := domain.ParseResourceType(string(rt)); err != nil || got != rt {
			t.Errorf("parse %s = %s, %v", rt, got, err)
		}
	}
	if _, err := domain.ParseResourceType("Runtime"); err == nil || !strings.Contains(err.Error(), "use one of runtime, clickhouse") {
		t.Errorf("parse Runtime: err = %v, want the valid types listed", err)
	}
}

func TestParseArgFlagsKeepsStringKeysAsStrings(t *testing.T) {
	args, err := domain.ParseArgFlags(domain.ResourceTypeRuntime, []string{"slots=2", "version=15"})
	if err != nil {
		t.Fatal(err)
	}
	if args["version"] != "15" {
		t.Fatalf("version = %#v, want the string \"15\"", args["version"])
	}
	if args["slots"] != int64(2) {
		t.Fatalf("slots = %#v, want the number 2", args["slots"])
	}
}
