package runtime_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ/runtime"
)

func TestDecodeRuntimeArgs(t *testing.T) {
	for _, tc := range []struct {
		args map[string]any
		want runtime.Args
	}{
		{nil, runtime.Args{Slots: runtime.DefaultSlots}},
		{map[string]any{"slots": float64(3)}, runtime.Args{Slots: 3}},
		{map[string]any{"slots": json.Number("4"), "version": "1.2"}, runtime.Args{Slots: 4, Version: "1.2"}},
		{map[string]any{"slots": int64(2)}, runtime.Args{Slots: 2}},
		{map[string]any{"slots": float64(runtime.MaxSlots)}, runtime.Args{Slots: runtime.MaxSlots}},
		{map[string]any{"slots": json.Number("2.0")}, runtime.Args{Slots: 2}},
	} {
		got, err := runtime.DecodeArgs(tc.args)
		if err != nil || *got != tc.want {
			t.Errorf("DecodeArgs(%v) = %+v, %v; want %+v", tc.args, got, err, tc.want)
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
		{map[string]any{"slots": 1e12}, "args.slots", "must be at most 1000000, got 1000000000000"},
		{map[string]any{"slots": -3}, "args.slots", "must be at least 1, got -3"},
		{map[string]any{"slots": float64(runtime.MaxSlots + 1)}, "args.slots", "must be at most 1000000, got 1000001"},
		{map[string]any{"slots": float64(1 << 31)}, "args.slots", "must be at most 1000000, got 2147483648"},
		{map[string]any{"slots": int64(1 << 31)}, "args.slots", "must be at most 1000000, got 2147483648"},
		{map[string]any{"slots": json.Number("2147483648")}, "args.slots", "must be at most 1000000, got 2147483648"},
		{map[string]any{"slots": json.Number("2.147483648e9")}, "args.slots", "must be at most 1000000, got 2.147483648e9"},
		{map[string]any{"slots": json.Number("1e400")}, "args.slots", "must be at most 1000000, got 1e400"},
		{map[string]any{"slots": json.Number("-1e400")}, "args.slots", "must be at least 1, got -1e400"},
		{map[string]any{"slots": json.Number("NaN")}, "args.slots", "whole number"},
		{map[string]any{"slots": math.Inf(1)}, "args.slots", "whole number"},
		{map[string]any{"slots": math.NaN()}, "args.slots", "whole number"},
		{map[string]any{"version": 7.0}, "args.version", "must be a string"},
		{map[string]any{"version": map[string]any{}}, "args.version", "an object"},
		{map[string]any{"version": "1.\xff"}, "args.version", `must be UTF-8 text, got "1.\xff"`},
	} {
		_, err := runtime.DecodeArgs(tc.args)
		expectFieldError(t, err, tc.field, tc.hint)
	}
}

func TestRuntimeArgsRoundTrip(t *testing.T) {
	for _, args := range []runtime.Args{{Slots: 1}, {Slots: 3, Version: "2.0"}} {
		raw, err := json.Marshal(args.AsMap())
		if err != nil {
			t.Fatal(err)
		}
		var stored map[string]any
		if err := json.Unmarshal(raw, &stored); err != nil {
			t.Fatal(err)
		}
		got, err := runtime.DecodeArgs(stored)
		if err != nil || *got != args {
			t.Errorf("round trip of %+v = %+v, %v", args, got, err)
		}
	}
}

func TestRuntimeConfig(t *testing.T) {
	want := runtime.Config{Host: "h1", Audience: "a", CPU: 2, MemoryGB: 4, StorageBytes: 1 << 30}
	raw, err := json.Marshal(want.AsMap())
	if err != nil {
		t.Fatal(err)
	}
	var stored map[string]any
	if err := json.Unmarshal(raw, &stored); err != nil {
		t.Fatal(err)
	}
	got, err := runtime.DecodeConfig(stored)
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
		_, err := runtime.DecodeConfig(tc.cfg)
		expectFieldError(t, err, tc.field, tc.hint)
	}
}

// TestSlotsBoundIsOneForCLIAndRows checks that a slot count the CLI accepts is one the
// agent accepts once the row's args come back from JSON, and that a count the CLI refuses
// is refused with the same words when a client writes it into the row.
func TestSlotsBoundIsOneForCLIAndRows(t *testing.T) {
	for _, slots := range []string{"1", "1000000", "1000001", "2147483648", "4294967296", "0", "-7"} {
		fromCLI, cliErr := runtime.Type.ParseArgFlags([]string{"slots=" + slots})
		var row map[string]any
		if err := json.Unmarshal([]byte(`{"slots": `+slots+`}`), &row); err != nil {
			t.Fatal(err)
		}
		if cliErr == nil {
			// What the CLI stores is what the agent reads back.
			raw, err := json.Marshal(fromCLI)
			if err != nil {
				t.Fatal(err)
			}
			row = nil
			if err := json.Unmarshal(raw, &row); err != nil {
				t.Fatal(err)
			}
		}
		got, rowErr := runtime.DecodeArgs(row)
		switch {
		case cliErr == nil && rowErr != nil:
			t.Errorf("slots=%s: the CLI accepts it and the agent refuses it: %v", slots, rowErr)
		case cliErr != nil && (rowErr == nil || rowErr.Error() != cliErr.Error()):
			t.Errorf("slots=%s: the CLI says %q, the agent %v; want the same refusal", slots, cliErr, rowErr)
		case cliErr == nil && fmt.Sprint(got.Slots) != slots:
			t.Errorf("slots=%s: the agent read %d", slots, got.Slots)
		}
	}
}

func TestSlotSize(t *testing.T) {
	if got, err := runtime.SlotSize("storage_bytes_per_slot", 40<<30, 1000); err != nil || got != 40<<30*1000 {
		t.Errorf("SlotSize(40 GiB, 1000) = %d, %v", got, err)
	}
	if got, err := runtime.SlotSize("cpu_per_slot", math.MaxInt64, 1); err != nil || got != math.MaxInt64 {
		t.Errorf("SlotSize(MaxInt64, 1) = %d, %v", got, err)
	}
	if got, err := runtime.SlotSize("cpu_per_slot", math.MaxInt64, 0); err != nil || got != 0 {
		t.Errorf("SlotSize(MaxInt64, 0) = %d, %v", got, err)
	}
	_, err := runtime.SlotSize("storage_bytes_per_slot", math.MaxInt64/2+1, 2)
	expectFieldError(t, err, "storage_bytes_per_slot", "is more than a 64-bit size holds: at most 4611686018427387903 per slot fits 2 slots")
	_, err = runtime.SlotSize("storage_bytes_per_slot", 1<<62, runtime.MaxSlots)
	expectFieldError(t, err, "storage_bytes_per_slot", "times 1000000 slots is more than a 64-bit size holds")
	_, err = runtime.SlotSize("memory_gb_per_slot", -1, 2)
	expectFieldError(t, err, "memory_gb_per_slot", "negative")
}

func TestRuntimeConfigHoldsSizesBeyond32Bits(t *testing.T) {
	want := runtime.Config{Host: "h1", CPU: 1 << 33, StorageBytes: 40 << 30 * 1000}
	raw, err := json.Marshal(want.AsMap())
	if err != nil {
		t.Fatal(err)
	}
	var stored map[string]any
	if err := json.Unmarshal(raw, &stored); err != nil {
		t.Fatal(err)
	}
	if got, err := runtime.DecodeConfig(stored); err != nil || *got != want {
		t.Fatalf("round trip = %+v, %v; want %+v", got, err, want)
	}
	_, err = runtime.DecodeConfig(map[string]any{"storage_bytes": 1e19})
	expectFieldError(t, err, "config.storage_bytes", "must be at most 9223372036854775807, got 10000000000000000000")
	_, err = runtime.DecodeConfig(map[string]any{"cpu": -2.0})
	expectFieldError(t, err, "config.cpu", "must be at least 0, got -2")
}

// FuzzDecodeArgs feeds runtime args decoding a row's args column as a client may have
// written it. Decoding must not depend on how the row's JSON was decoded (float64 numbers, or
// json.Number), must keep slots within their bound, and accepted args must survive the
// round trip through the form they are stored in. Config decoding must not panic.
func FuzzDecodeArgs(f *testing.F) {
	for _, seed := range []string{
		`{"slots": 2, "version": "1.4.0"}`,
		`{"slots": 1000000}`,
		`{"slots": 1000001}`,
		`{"slots": 2147483648}`,
		`{"slots": 2.147483648e9}`,
		`{"slots": 2.0}`,
		`{"slots": 2.5}`,
		`{"slots": -1e-400}`,
		`{"slots": "2"}`,
		`{"slots": null, "version": 7}`,
		`{"host": "h", "cpu": 4, "storage_bytes": 42949672960}`,
		`{}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		floats := decodeRowOrNil(raw, false)
		numbers := decodeRowOrNil(raw, true)
		if floats == nil || numbers == nil {
			return
		}
		a, errA := runtime.DecodeArgs(floats)
		b, errB := runtime.DecodeArgs(numbers)
		if (errA == nil) != (errB == nil) {
			t.Fatalf("args %s: decoded with float64 numbers %v, with json.Number %v; want the same answer", raw, errA, errB)
		}
		if errA != nil {
			return
		}
		if *a != *b {
			t.Fatalf("args %s: %+v with float64 numbers, %+v with json.Number", raw, *a, *b)
		}
		if a.Slots < 1 || a.Slots > runtime.MaxSlots {
			t.Fatalf("args %s: accepted slots %d, outside 1..%d", raw, a.Slots, runtime.MaxSlots)
		}
		stored, err := json.Marshal(a.AsMap())
		if err != nil {
			t.Fatal(err)
		}
		again, err := runtime.DecodeArgs(decodeRow(t, stored, false))
		if err != nil || *again != *a {
			t.Fatalf("args %+v stored as %s read back as %+v, %v", *a, stored, again, err)
		}
		_, _ = runtime.DecodeConfig(floats)
		_, _ = runtime.DecodeConfig(numbers)
	})
}

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
