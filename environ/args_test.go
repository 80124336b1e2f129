package environ_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/kubernetes"
	"github.com/berth-dev/berth/environ/runtime"
)

// testTypes is the catalog of a registry serving the types Berth ships with.
var testTypes = func() *environ.Catalog {
	r := environ.NewRegistry()
	r.Register("static", unusedInit, runtime.Type)
	r.Register("kubernetes", unusedInit, kubernetes.Types...)
	return r.Catalog()
}()

func unusedInit(string, json.RawMessage, environ.Deps) (environ.Environ, error) { return nil, nil }

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

func TestValidateArgs(t *testing.T) {
	if err := testTypes.ValidateArgs(domain.ResourceTypeRuntime, map[string]any{"slots": 2}); err != nil {
		t.Errorf("valid runtime args: %v", err)
	}
	expectFieldError(t, testTypes.ValidateArgs(domain.ResourceTypeRuntime, map[string]any{"cpu": 2}), "args.cpu", "unknown key")
	expectFieldError(t, testTypes.ValidateArgs(domain.ResourceTypeClickHouse, map[string]any{"cpu": 2}), "args.cpu", "no keys")
	err := testTypes.ValidateArgs("vm", nil)
	if err == nil || !strings.Contains(err.Error(), `"vm"`) || !strings.Contains(err.Error(), "runtime, clickhouse") {
		t.Errorf("unknown type: err = %v, want it named with the valid types", err)
	}
}

func TestParseArgFlags(t *testing.T) {
	got, err := testTypes.ParseArgFlags(domain.ResourceTypeRuntime, []string{"slots=3", " version =v2"})
	if err != nil || !reflect.DeepEqual(got, map[string]any{"slots": int64(3), "version": "v2"}) {
		t.Fatalf("parse = %#v, %v", got, err)
	}
	if got, err := testTypes.ParseArgFlags(domain.ResourceTypeClickHouse, nil); err != nil || len(got) != 0 {
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
		{domain.ResourceTypeRuntime, []string{"slots=2147483648"}, "args.slots", "must be at most 1000000, got 2147483648"},
		{domain.ResourceTypeRuntime, []string{"slots=99999999999999999999"}, "args.slots", "must be at most 1000000, got 100000000000000000000"},
		{domain.ResourceTypeRuntime, []string{"colour=red"}, "args.colour", "unknown key"},
		{domain.ResourceTypeClickHouse, []string{"slots=1"}, "args.slots", "no keys"},
	} {
		_, err := testTypes.ParseArgFlags(tc.t, tc.pairs)
		expectFieldError(t, err, tc.field, tc.hint)
	}
}

func TestCatalogLooksUpServedTypes(t *testing.T) {
	for _, rt := range testTypes.TypeNames() {
		if def, err := testTypes.Lookup(rt); err != nil || def.Name != rt {
			t.Errorf("lookup %s = %v, %v", rt, def, err)
		}
	}
	_, err := testTypes.Lookup("Runtime")
	var unknown *environ.UnknownTypeError
	if !errors.As(err, &unknown) || unknown.Type != "Runtime" || !strings.Contains(err.Error(), "it serves runtime, clickhouse") {
		t.Errorf("lookup Runtime: err = %v, want an *UnknownTypeError listing the served types", err)
	}
	if !environ.IsPermanent(fmt.Errorf("reconcile: %w", err)) {
		t.Errorf("an unknown type is not permanent: %v", err)
	}
}

func TestParseArgFlagsKeepsStringKeysAsStrings(t *testing.T) {
	args, err := testTypes.ParseArgFlags(domain.ResourceTypeRuntime, []string{"slots=2", "version=15"})
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

// FuzzParseArgFlags feeds the CLI's --arg parsing newline-separated key=value pairs. Args the
// CLI accepts must be args the agent accepts, with the same meaning, once they have been
// stored as JSON and read back (either way a row can be decoded); a refusal is a
// *domain.FieldError that starts with the field it names.
func FuzzParseArgFlags(f *testing.F) {
	for _, seed := range []struct {
		kind  uint8
		pairs string
	}{
		{0, "slots=2\nversion=1.4.0"},
		{0, "slots=2147483648"},
		{0, "slots=99999999999999999999"},
		{0, "slots=1e3\nversion=15"},
		{0, "slots=-0"},
		{0, "slots= 3"},
		{0, `slots={"n": 1}`},
		{0, "version=\nslots=1000000"},
		{0, "=3"},
		{1, "slots=1"},
		{1, ""},
	} {
		f.Add(seed.kind, seed.pairs)
	}
	f.Fuzz(func(t *testing.T, kind uint8, pairs string) {
		served := testTypes.TypeNames()
		typ := served[int(kind)%len(served)]
		var flags []string
		if pairs != "" {
			flags = strings.Split(pairs, "\n")
		}
		args, err := testTypes.ParseArgFlags(typ, flags)
		if err != nil {
			var fe *domain.FieldError
			if !errors.As(err, &fe) || !strings.HasPrefix(err.Error(), fe.Field+": ") {
				t.Fatalf("ParseArgFlags(%s, %q) = %v (%T), want a *FieldError naming its field", typ, flags, err, err)
			}
			return
		}
		raw, err := json.Marshal(args)
		if err != nil {
			t.Fatalf("args %#v the CLI accepted do not encode: %v", args, err)
		}
		for _, useNumber := range []bool{false, true} {
			row := decodeRow(t, raw, useNumber)
			if err := testTypes.ValidateArgs(typ, row); err != nil {
				t.Fatalf("the CLI accepted %q as %s but the agent refuses the row %s: %v", flags, raw, raw, err)
			}
			if typ != domain.ResourceTypeRuntime {
				continue
			}
			cli, _ := runtime.DecodeArgs(args)
			agent, _ := runtime.DecodeArgs(row)
			if *cli != *agent {
				t.Fatalf("the CLI means %+v by %q, the agent reads %+v from %s", *cli, flags, *agent, raw)
			}
		}
	})
}

// decodeRow decodes a JSON object the way a store reads a column, with numbers as float64
// or as json.Number.
func decodeRow(t *testing.T, raw []byte, useNumber bool) map[string]any {
	t.Helper()
	row := decodeRowOrNil(raw, useNumber)
	if row == nil {
		t.Fatalf("%s does not decode as a JSON object", raw)
	}
	return row
}

func decodeRowOrNil(raw []byte, useNumber bool) map[string]any {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if useNumber {
		dec.UseNumber()
	}
	var row map[string]any
	if err := dec.Decode(&row); err != nil || row == nil || dec.More() {
		return nil
	}
	return row
}
