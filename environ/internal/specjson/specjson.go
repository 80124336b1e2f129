// Package specjson decodes provisioner specs strictly: an unknown key or a value of the wrong
// type is a *domain.FieldError naming the field's path, so a bad spec says what to fix.
package specjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/berth-dev/berth/domain"
)

// Field is a known key of a JSON object and where its value goes.
type Field struct {
	Name string
	Dst  any
}

// DecodeObject decodes the JSON object msg into fields, refusing unknown keys. what names the
// object in errors; prefix is prepended to key names to make field paths.
func DecodeObject(what, prefix string, msg json.RawMessage, fields []Field) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(msg, &obj); err != nil || obj == nil {
		return &domain.FieldError{Field: what, Msg: "must be a JSON object, got " + Preview(msg)}
	}
	known := make([]string, len(fields))
	for i, f := range fields {
		known[i] = f.Name
	}
	for key := range obj {
		if !contains(known, key) {
			return &domain.FieldError{Field: prefix + key, Msg: "unknown field; known: " + strings.Join(known, ", ")}
		}
	}
	for _, f := range fields {
		v, ok := obj[f.Name]
		if !ok {
			continue
		}
		if err := json.Unmarshal(v, f.Dst); err != nil {
			return &domain.FieldError{Field: prefix + f.Name, Msg: "must be " + kind(f.Dst) + ", got " + Preview(v)}
		}
	}
	return nil
}

// Preview shortens a JSON value for an error message.
func Preview(v json.RawMessage) string {
	s := string(bytes.TrimSpace(v))
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	return s
}

func kind(dst any) string {
	switch dst.(type) {
	case *string:
		return "a string"
	case *int, *int64:
		return "a whole number"
	case *float64:
		return "a number"
	case *[]json.RawMessage:
		return "a list"
	case *json.RawMessage:
		return "a JSON value"
	default:
		return fmt.Sprintf("a %T", dst)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
