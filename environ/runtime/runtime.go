// Package runtime defines the runtime resource type, which the static and kubernetes
// environs both serve: its args (slots and version), their defaults and bounds, how a
// runtime is sized by its slots, and the config clients reach it with.
package runtime

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// Name is the runtime type's name.
const Name = domain.ResourceTypeRuntime

// DefaultSlots is the slot count of a runtime whose args do not say.
const DefaultSlots = 1

// MaxSlots is the most slots a runtime may ask for, and a static host may offer. It is one
// bound for every way a count arrives (a CLI flag, a JSON number in a row, a spec), far above
// any real host, and small enough that slot counts fit the slot tables' 32-bit columns and
// sums of them never overflow.
const MaxSlots = 1_000_000

// Type is the runtime type's definition, registered by every environ that serves it.
var Type = &environ.TypeDef{
	Name: Name,
	Help: "an instance on a runtime host, sized in slots",
	Args: []environ.ArgDef{
		{Name: "slots", Help: "whole number, 1 to " + strconv.Itoa(MaxSlots), Default: strconv.Itoa(DefaultSlots)},
		{Name: "version", Help: "string", String: true},
	},
	Validate: func(args map[string]any) error {
		_, err := DecodeArgs(args)
		return err
	},
}

// Args are the desired arguments of a runtime resource.
type Args struct {
	Slots   int    // how many slots of a host the runtime gets; 1 to MaxSlots (default 1)
	Version string // runtime version to run; empty means the environ's default
}

// DecodeArgs decodes args strictly: an unknown key or a wrong type is a *domain.FieldError.
func DecodeArgs(args map[string]any) (*Args, error) {
	if err := environ.OnlyKeys("args", args, "slots", "version"); err != nil {
		return nil, err
	}
	out := &Args{Slots: DefaultSlots}
	if v, ok := args["slots"]; ok {
		n, err := environ.WholeNumber("args.slots", v, 1, MaxSlots)
		if err != nil {
			return nil, err
		}
		out.Slots = int(n)
	}
	if v, ok := args["version"]; ok {
		s, isString := v.(string)
		if !isString {
			return nil, &domain.FieldError{Field: "args.version", Msg: fmt.Sprintf("must be a string, got %s", environ.Describe(v))}
		}
		if !utf8.ValidString(s) {
			// JSON would store U+FFFD in place of the bytes: the agent would read another version.
			return nil, &domain.FieldError{Field: "args.version", Msg: fmt.Sprintf("must be UTF-8 text, got %q", s)}
		}
		out.Version = s
	}
	return out, nil
}

// AsMap returns the args as stored in the resources table.
func (a *Args) AsMap() map[string]any {
	m := map[string]any{"slots": a.Slots}
	if a.Version != "" {
		m["version"] = a.Version
	}
	return m
}

// Config is what clients use to reach a runtime resource.
type Config struct {
	Host         string
	Audience     string
	CPU          int
	MemoryGB     int
	StorageBytes int64
}

// DecodeConfig decodes cfg strictly.
func DecodeConfig(cfg map[string]any) (*Config, error) {
	if err := environ.OnlyKeys("config", cfg, "host", "audience", "cpu", "memory_gb", "storage_bytes"); err != nil {
		return nil, err
	}
	out := &Config{}
	var err error
	if out.Host, err = environ.OptionalString("config.host", cfg["host"]); err != nil {
		return nil, err
	}
	if out.Audience, err = environ.OptionalString("config.audience", cfg["audience"]); err != nil {
		return nil, err
	}
	if v, ok := cfg["cpu"]; ok {
		n, err := environ.WholeNumber("config.cpu", v, 0, math.MaxInt)
		if err != nil {
			return nil, err
		}
		out.CPU = int(n)
	}
	if v, ok := cfg["memory_gb"]; ok {
		n, err := environ.WholeNumber("config.memory_gb", v, 0, math.MaxInt)
		if err != nil {
			return nil, err
		}
		out.MemoryGB = int(n)
	}
	if v, ok := cfg["storage_bytes"]; ok {
		if out.StorageBytes, err = environ.WholeNumber("config.storage_bytes", v, 0, math.MaxInt64); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// AsMap returns the config as stored in the resources table.
func (c *Config) AsMap() map[string]any {
	return map[string]any{
		"host":          c.Host,
		"audience":      c.Audience,
		"cpu":           c.CPU,
		"memory_gb":     c.MemoryGB,
		"storage_bytes": c.StorageBytes,
	}
}

// SlotSize returns perSlot times slots: a runtime's share of something measured per slot
// (cores, gigabytes, bytes). When the product is more than an int64 holds it returns a
// *domain.FieldError on field, the per-slot setting, naming the most per slot that fits.
func SlotSize(field string, perSlot int64, slots int) (int64, error) {
	if perSlot < 0 || slots < 0 {
		return 0, &domain.FieldError{Field: field, Msg: fmt.Sprintf("%d per slot times %d slots: neither may be negative", perSlot, slots)}
	}
	if slots > 0 && perSlot > math.MaxInt64/int64(slots) {
		return 0, &domain.FieldError{Field: field, Msg: fmt.Sprintf("%d per slot times %d slots is more than a 64-bit size holds: at most %d per slot fits %d slots",
			perSlot, slots, math.MaxInt64/int64(slots), slots)}
	}
	return perSlot * int64(slots), nil
}
