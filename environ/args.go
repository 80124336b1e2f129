package environ

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/berth-dev/berth/domain"
)

// OnlyKeys refuses a key of m not in allowed with a *domain.FieldError on prefix.key that
// lists the allowed keys: an environ's decoding of args or config is strict, so that a
// misspelt key is an error instead of a silently ignored wish.
func OnlyKeys(prefix string, m map[string]any, allowed ...string) error {
	var unknown []string
	for k := range m {
		if !slices.Contains(allowed, k) {
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
	return &domain.FieldError{Field: prefix + "." + unknown[0], Msg: "unknown key; " + hint}
}

// WholeNumber accepts the number forms args arrive in (JSON numbers as float64 or
// json.Number, and Go integers) when they are whole and in [lo, hi], and refuses fractions,
// strings and everything else. A json.Number that is not an int64 counts as the float64
// encoding/json decodes it to, so a row means the same whichever way it was decoded. A whole
// number out of range is told the bound, however it was written (2147483648, 2.147483648e9
// or 1e400).
func WholeNumber(field string, v any, lo, hi int64) (int64, error) {
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
			return 0, &domain.FieldError{Field: field, Msg: fmt.Sprintf("must be a whole number, got %q", string(x))}
		case math.IsInf(f, 1):
			return 0, &domain.FieldError{Field: field, Msg: fmt.Sprintf("must be at most %d, got %s", hi, x)}
		case math.IsInf(f, -1):
			return 0, &domain.FieldError{Field: field, Msg: fmt.Sprintf("must be at least %d, got %s", lo, x)}
		}
		return wholeFloat(field, f, string(x), lo, hi)
	default:
		return 0, &domain.FieldError{Field: field, Msg: fmt.Sprintf("must be a whole number, got %s", Describe(v))}
	}
	return inRange(field, n, strconv.FormatInt(n, 10), lo, hi)
}

// wholeFloat is wholeNumber for a float64, shown as written.
func wholeFloat(field string, f float64, written string, lo, hi int64) (int64, error) {
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f):
		return 0, &domain.FieldError{Field: field, Msg: fmt.Sprintf("must be a whole number, got %s", written)}
	case f >= 0x1p63:
		return 0, &domain.FieldError{Field: field, Msg: fmt.Sprintf("must be at most %d, got %s", hi, written)}
	case f < -0x1p63:
		return 0, &domain.FieldError{Field: field, Msg: fmt.Sprintf("must be at least %d, got %s", lo, written)}
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
		return 0, &domain.FieldError{Field: field, Msg: fmt.Sprintf("must be at least %d, got %s", lo, written)}
	case n > hi:
		return 0, &domain.FieldError{Field: field, Msg: fmt.Sprintf("must be at most %d, got %s", hi, written)}
	}
	return n, nil
}

// OptionalString is v as a string, "" when it is absent (nil), and a *domain.FieldError on
// field when it is anything else.
func OptionalString(field string, v any) (string, error) {
	if v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", &domain.FieldError{Field: field, Msg: fmt.Sprintf("must be a string, got %s", Describe(v))}
	}
	return s, nil
}

// Describe names v's JSON kind and value for an error message ("the string \"x\"", "a list").
func Describe(v any) string {
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

// parseArgValue reads the value of an --arg whose type does not say it is a string: a whole
// number, else JSON when it parses as JSON, else the text itself.
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
