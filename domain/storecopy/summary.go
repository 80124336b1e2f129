package storecopy

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"time"
)

// Summary is what Copy compares between the source and the target: each table's row count
// and a checksum of its rows.
type Summary map[Table]TableSummary

// TableSummary is one table's row count and checksum.
type TableSummary struct {
	Rows int64
	// Checksum does not depend on the order rows are read in, nor on how a store writes a
	// value: times count to the millisecond, JSON by its value (not its spacing, key order
	// or number notation).
	Checksum Checksum
}

// Checksum is the sum of the SHA-256 digests of a table's rows, in four 64-bit lanes.
type Checksum [4]uint64

// String is the checksum's first lane in hex, enough to tell checksums apart by eye.
func (c Checksum) String() string { return fmt.Sprintf("%016x", c[0]) }

// Summarize returns an empty summary of every table, to fold batches into with Add.
func Summarize() Summary {
	s := Summary{}
	for _, t := range AllTables {
		s[t] = TableSummary{}
	}
	return s
}

// Add folds the batch's rows into the summary.
func (s Summary) Add(b Batch) error {
	t := b.Table()
	if t == "" {
		return nil
	}
	ts := s[t]
	columns := t.Columns()
	var err error
	for _, row := range b.Values() {
		e := rowEncoder{}
		for i, v := range row {
			e.value(columns[i], v)
		}
		if e.err != nil && err == nil {
			err = fmt.Errorf("%s: %w", t, e.err)
		}
		digest := sha256.Sum256(e.buf.Bytes())
		for i := range ts.Checksum {
			ts.Checksum[i] += binary.BigEndian.Uint64(digest[i*8:])
		}
		ts.Rows++
	}
	s[t] = ts
	return err
}

// rowEncoder writes a row's values in one unambiguous form: each value is a kind byte, a
// length and the value's canonical text.
type rowEncoder struct {
	buf bytes.Buffer
	err error
}

// value writes the value of column as its type (and, for text, whether the column holds
// JSON) says.
func (e *rowEncoder) value(column string, v any) {
	switch v := v.(type) {
	case string:
		if jsonColumns[column] {
			e.json(v)
		} else {
			e.str(v)
		}
	case int64:
		e.int(v)
	case bool:
		e.bool(v)
	case time.Time:
		e.time(v)
	case *time.Time:
		e.optTime(v)
	case *string:
		e.optStr(v)
	case *int64:
		e.optInt(v)
	default:
		if e.err == nil {
			e.err = fmt.Errorf("column %s holds a %T, which a summary cannot encode", column, v)
		}
	}
}

func (e *rowEncoder) put(kind byte, v string) *rowEncoder {
	e.buf.WriteByte(kind)
	e.buf.WriteString(strconv.Itoa(len(v)))
	e.buf.WriteByte(':')
	e.buf.WriteString(v)
	return e
}

func (e *rowEncoder) str(v string) *rowEncoder { return e.put('s', v) }
func (e *rowEncoder) int(v int64) *rowEncoder  { return e.put('i', strconv.FormatInt(v, 10)) }
func (e *rowEncoder) bool(v bool) *rowEncoder  { return e.put('b', strconv.FormatBool(v)) }

func (e *rowEncoder) time(t time.Time) *rowEncoder {
	return e.put('t', strconv.FormatInt(t.UnixMilli(), 10))
}

func (e *rowEncoder) optStr(v *string) *rowEncoder {
	if v == nil {
		return e.put('n', "")
	}
	return e.str(*v)
}

func (e *rowEncoder) optInt(v *int64) *rowEncoder {
	if v == nil {
		return e.put('n', "")
	}
	return e.int(*v)
}

func (e *rowEncoder) optTime(t *time.Time) *rowEncoder {
	if t == nil {
		return e.put('n', "")
	}
	return e.time(*t)
}

func (e *rowEncoder) json(text string) *rowEncoder {
	canonical, err := CanonicalJSON(text)
	if err != nil && e.err == nil {
		e.err = err
	}
	return e.put('j', canonical)
}

// CanonicalJSON renders a JSON text in one form per value: no spaces, object keys sorted
// (the last of duplicate keys wins, as in PostgreSQL's jsonb), and numbers as exact
// fractions (1, 1.0 and 1e0 are the same number).
func CanonicalJSON(text string) (string, error) {
	dec := json.NewDecoder(bytes.NewReader([]byte(text)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("JSON %q: %w", text, err)
	}
	var out bytes.Buffer
	if err := writeCanonical(&out, v); err != nil {
		return "", fmt.Errorf("JSON %q: %w", text, err)
	}
	return out.String(), nil
}

func writeCanonical(out *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				out.WriteByte(',')
			}
			key, _ := json.Marshal(k)
			out.Write(key)
			out.WriteByte(':')
			if err := writeCanonical(out, v[k]); err != nil {
				return err
			}
		}
		out.WriteByte('}')
	case []any:
		out.WriteByte('[')
		for i, item := range v {
			if i > 0 {
				out.WriteByte(',')
			}
			if err := writeCanonical(out, item); err != nil {
				return err
			}
		}
		out.WriteByte(']')
	case json.Number:
		r, ok := new(big.Rat).SetString(string(v))
		if !ok {
			return fmt.Errorf("number %s", v)
		}
		out.WriteString(r.RatString())
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		out.Write(b)
	}
	return nil
}
