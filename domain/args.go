package domain

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	jujuerrors "github.com/juju/errors"
)

// FieldError names the field of args or config that is wrong and says how to fix it.
type FieldError struct {
	Field string // e.g. "args.slots"
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

// Is makes a FieldError of juju/errors' NotValid kind: errors.Is(err, errors.NotValid).
func (e *FieldError) Is(target error) bool { return target == jujuerrors.NotValid }

// RuntimeArgs are the desired arguments of a runtime resource.
type RuntimeArgs struct {
	Slots   int    // how many slots of a host the runtime gets; 1 to MaxSlots (default 1)
	Version string // runtime version to run; empty means the environ's default
}

// DefaultRuntimeSlots is the slot count of a runtime whose args do not say.
const DefaultRuntimeSlots = 1

// MaxSlots is the most slots a runtime may ask for, and a static host may offer. It is one
// bound for every way a count arrives (a CLI flag, a JSON number in a row, a spec), far above
// any real host, and small enough that slot counts fit the slot tables' 32-bit columns and
// sums of them never overflow.
const MaxSlots = 1_000_000

// NewRuntimeArgs decodes args strictly: an unknown key or a wrong type is a *FieldError.
func NewRuntimeArgs(args map[string]any) (*RuntimeArgs, error) {
	if err := onlyKeys("args", args, "slots", "version"); err != nil {
		return nil, err
	}
	out := &RuntimeArgs{Slots: DefaultRuntimeSlots}
	if v, ok := args["slots"]; ok {
		n, err := wholeNumber("args.slots", v, 1, MaxSlots)
		if err != nil {
			return nil, err
		}
		out.Slots = int(n)
	}
	if v, ok := args["version"]; ok {
		s, isString := v.(string)
		if !isString {
			return nil, &FieldError{"args.version", fmt.Sprintf("must be a string, got %s", describe(v))}
		}
		if !utf8.ValidString(s) {
			// JSON would store U+FFFD in place of the bytes: the agent would read another version.
			return nil, &FieldError{"args.version", fmt.Sprintf("must be UTF-8 text, got %q", s)}
		}
		out.Version = s
	}
	return out, nil
}

// AsMap returns the args as stored in the resources table.
func (a *RuntimeArgs) AsMap() map[string]any {
	m := map[string]any{"slots": a.Slots}
	if a.Version != "" {
		m["version"] = a.Version
	}
	return m
}

// ClickhouseArgs are the desired arguments of a clickhouse resource. It takes none yet.
type ClickhouseArgs struct{}

// NewClickhouseArgs decodes args strictly.
func NewClickhouseArgs(args map[string]any) (*ClickhouseArgs, error) {
	if err := onlyKeys("args", args); err != nil {
		return nil, err
	}
	return &ClickhouseArgs{}, nil
}

// ValidateArgs checks args against the schema of resource type t.
func ValidateArgs(t ResourceType, args map[string]any) error {
	switch t {
	case ResourceTypeRuntime:
		_, err := NewRuntimeArgs(args)
		return err
	case ResourceTypeClickHouse:
		_, err := NewClickhouseArgs(args)
		return err
	default:
		_, err := ParseResourceType(string(t))
		return err
	}
}

// RuntimeConfig is what clients use to reach a runtime resource.
type RuntimeConfig struct {
	Host         string
	Audience     string
	CPU          int
	MemoryGB     int
	StorageBytes int64
}

// NewRuntimeConfig decodes cfg strictly.
func NewRuntimeConfig(cfg map[string]any) (*RuntimeConfig, error) {
	if err := onlyKeys("config", cfg, "host", "audience", "cpu", "memory_gb", "storage_bytes"); err != nil {
		return nil, err
	}
	out := &RuntimeConfig{}
	var err error
	if out.Host, err = optionalString("config.host", cfg["host"]); err != nil {
		return nil, err
	}
	if out.Audience, err = optionalString("config.audience", cfg["audience"]); err != nil {
		return nil, err
	}
	if v, ok := cfg["cpu"]; ok {
		n, err := wholeNumber("config.cpu", v, 0, math.MaxInt)
		if err != nil {
			return nil, err
		}
		out.CPU = int(n)
	}
	if v, ok := cfg["memory_gb"]; ok {
		n, err := wholeNumber("config.memory_gb", v, 0, math.MaxInt)
		if err != nil {
			return nil, err
		}
		out.MemoryGB = int(n)
	}
	if v, ok := cfg["storage_bytes"]; ok {
		if out.StorageBytes, err = wholeNumber("config.storage_bytes", v, 0, math.MaxInt64); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// AsMap returns the config as stored in the resources table.
func (c *RuntimeConfig) AsMap() map[string]any {
	return map[string]any{
		"host":          c.Host,
		"audience":      c.Audience,
		"cpu":           c.CPU,
		"memory_gb":     c.MemoryGB,
		"storage_bytes": c.StorageBytes,
	}
}

// ClickhouseConfig is what clients use to reach a clickhouse resource. It holds no secret,
// because the row is copied into backups, store copies and CLI output: the DSN carries no
// password, and PasswordSecret* name the Kubernetes Secret key that holds it, which clients
// read with credentials of their own.
type ClickhouseConfig struct {
	DSN                     string
	PasswordSecretNamespace string
	PasswordSecretName      string
	PasswordSecretKey       string
}

// NewClickhouseConfig decodes cfg strictly.
func NewClickhouseConfig(cfg map[string]any) (*ClickhouseConfig, error) {
	if err := onlyKeys("config", cfg, "dsn", "password_secret_namespace", "password_secret_name", "password_secret_key"); err != nil {
		return nil, err
	}
	out := &ClickhouseConfig{}
	for _, f := range []struct {
		key string
		dst *string
	}{
		{"dsn", &out.DSN},
		{"password_secret_namespace", &out.PasswordSecretNamespace},
		{"password_secret_name", &out.PasswordSecretName},
		{"password_secret_key", &out.PasswordSecretKey},
	} {
		v, err := optionalString("config."+f.key, cfg[f.key])
		if err != nil {
			return nil, err
		}
		*f.dst = v
	}
	return out, nil
}

// AsMap returns the config as stored in the resources table.
func (c *ClickhouseConfig) AsMap() map[string]any {
	return map[string]any{
		"dsn":                       c.DSN,
		"password_secret_namespace": c.PasswordSecretNamespace,
		"password_secret_name":      c.PasswordSecretName,
		"password_secret_key":       c.PasswordSecretKey,
	}
}

// ParseArgFlags turns "key=value" pairs (the CLI's --arg flags) into args for resource type t.
// Values of known keys are converted to the key's type ("slots=3" gives the number 3); values
// of other keys are kept as JSON if they parse as JSON, else as strings, and then rejected by
// the type's strict decoding with an error naming the key.
func ParseArgFlags(t ResourceType, pairs []string) (map[string]any, error) {
	args := make(map[string]any, len(pairs))
	for _, pair := range pairs {
		key, value, ok := strings.Cut(pair, "=")
		key = strings.TrimSpace(key)
		if !ok || key == "" {
			return nil, &FieldError{"--arg", fmt.Sprintf("%q is not key=value (e.g. --arg slots=2)", pair)}
		}
		if contains(stringArgKeys[t], key) {
			args[key] = value
		} else {
			args[key] = parseArgValue(value)
		}
	}
	if err := ValidateArgs(t, args); err != nil {
		return nil, err
	}
	return args, nil
}

// stringArgKeys are the args that are strings even when they look like numbers ("version=15").
var stringArgKeys = map[ResourceType][]string{
	ResourceTypeRuntime: {"version"},
}

func parseArgValue(s string) any {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n
	}
	var v any
	trimmed := strings.TrimSpace(s)
	if trimmed != "" && strings.ContainsAny(trimmed[:1], "{[\"tfn-0123456789") && json.Unmarshal([]byte(trimmed), &v) == nil {
		return v
	}
	return s
}

func onlyKeys(prefix string, m map[string]any, allowed ...string) error {
	var unknown []string
	for k := range m {
		if !contains(allowed, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	sort.Strings(unknown)
	hint := "it takes no keys"
	if len(allowed) > 0 {
		hint = "known keys: " + strings.Join(allowed, ", ")
	}
	return &FieldError{prefix + "." + unknown[0], "unknown key; " + hint}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// SlotSize returns perSlot times slots: a resource's share of something measured per slot
// (cores, gigabytes, bytes). When the product is more than an int64 holds it returns a
// *FieldError on field, the per-slot setting, naming the most per slot that fits.
func SlotSize(field string, perSlot int64, slots int) (int64, error) {
	if perSlot < 0 || slots < 0 {
		return 0, &FieldError{field, fmt.Sprintf("%d per slot times %d slots: neither may be negative", perSlot, slots)}
	}
	if slots > 0 && perSlot > math.MaxInt64/int64(slots) {
		return 0, &FieldError{field, fmt.Sprintf("%d per slot times %d slots is more than a 64-bit size holds: at most %d per slot fits %d slots",
			perSlot, slots, math.MaxInt64/int64(slots), slots)}
	}
	return perSlot * int64(slots), nil
}

// wholeNumber accepts the number forms args arrive in (JSON numbers as float64 or
// json.Number, and Go integers) when they are whole and in [lo, hi], and refuses fractions,
// strings and everything else. A json.Number that is not an int64 counts as the float64
// encoding/json decodes it to, so a row means the same whichever way it was decoded. A whole
// number out of range is told the bound, however it was written (2147483648, 2.147483648e9
// or 1e400).
func wholeNumber(field string, v any, lo, hi int64) (int64, error) {
	var n int64
	switch x := v.(type) {
	case int:
		n = int64(x)
	case int32:
		n = int64(x)
	case int64:
		n = x
	case float64:
		return wholeFloat(field, x, formatFloat(x), lo, hi)
	case json.Number:
		i, err := x.Int64()
		if err == nil {
			n = i
			break
		}
		f, err := strconv.ParseFloat(string(x), 64)
		switch {
		case !json.Valid([]byte(x)) || (err != nil && !errors.Is(err, strconv.ErrRange)):
			return 0, &FieldError{field, fmt.Sprintf("must be a whole number, got %q", string(x))}
		case math.IsInf(f, 1):
			return 0, &FieldError{field, fmt.Sprintf("must be at most %d, got %s", hi, x)}
		case math.IsInf(f, -1):
			return 0, &FieldError{field, fmt.Sprintf("must be at least %d, got %s", lo, x)}
		}
		return wholeFloat(field, f, string(x), lo, hi)
	default:
		return 0, &FieldError{field, fmt.Sprintf("must be a whole number, got %s", describe(v))}
	}
	return inRange(field, n, strconv.FormatInt(n, 10), lo, hi)
}

// wholeFloat is wholeNumber for a float64, shown as written.
func wholeFloat(field string, f float64, written string, lo, hi int64) (int64, error) {
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f):
		return 0, &FieldError{field, fmt.Sprintf("must be a whole number, got %s", written)}
	case f >= 0x1p63:
		return 0, &FieldError{field, fmt.Sprintf("must be at most %d, got %s", hi, written)}
	case f < -0x1p63:
		return 0, &FieldError{field, fmt.Sprintf("must be at least %d, got %s", lo, written)}
	}
	return inRange(field, int64(f), written, lo, hi)
}

// formatFloat writes whole numbers of up to 21 digits out in full (2147483648, not
// 2.147483648e+09) and any other the shortest way.
func formatFloat(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e21 {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

func inRange(field string, n int64, written string, lo, hi int64) (int64, error) {
	switch {
	case n < lo:
		return 0, &FieldError{field, fmt.Sprintf("must be at least %d, got %s", lo, written)}
	case n > hi:
		return 0, &FieldError{field, fmt.Sprintf("must be at most %d, got %s", hi, written)}
	}
	return n, nil
}

func optionalString(field string, v any) (string, error) {
	if v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", &FieldError{field, fmt.Sprintf("must be a string, got %s", describe(v))}
	}
	return s, nil
}

func describe(v any) string {
	switch v := v.(type) {
	case string:
		return fmt.Sprintf("the string %q", v)
	case bool:
		return fmt.Sprintf("the boolean %v", v)
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	default:
		return fmt.Sprintf("%v", v)
	}
}
