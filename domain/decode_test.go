package domain_test

import (
	"strings"
	"testing"

	"github.com/berth-dev/berth/domain"
)

func TestDecodeObjectColumn(t *testing.T) {
	for _, tc := range []struct {
		raw    string
		reason string // "" when it decodes
	}{
		{`{"host": "a", "slots": 2}`, ""},
		{`null`, ""},
		{`{"host": 1e400}`, "number 1e+400 out of range"},
		{`{"a": [{"b": -1.5e309}]}`, "number -1.5e+309 out of range"},
		{`{"host": 1` + strings.Repeat("0", 500) + `}`, "number 1e+500 out of range"},
		{`[1, 2]`, "it holds a JSON array, not an object"},
		{`"text"`, "it holds a JSON string, not an object"},
		{`7`, "it holds a JSON number, not an object"},
		{`true`, "it holds a JSON bool, not an object"},
		{`{"a": ` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`, "nested deeper than 10000 levels"},
		{`{"a": `, "invalid JSON at byte 6"},
		{`  `, "it is empty"},
	} {
		m, bad := domain.DecodeObjectColumn("config", []byte(tc.raw))
		switch {
		case tc.reason == "" && bad != nil:
			t.Errorf("%.40q: unreadable (%v), want it decoded", tc.raw, bad)
		case tc.reason != "" && (bad == nil || m != nil):
			t.Errorf("%.40q: decoded to %v, want unreadable: %s", tc.raw, m, tc.reason)
		case tc.reason != "" && bad.Error() != "config is not JSON Berth can read: "+tc.reason:
			t.Errorf("%.40q: %q, want %q", tc.raw, bad.Error(), "config is not JSON Berth can read: "+tc.reason)
		}
	}
	if m, bad := domain.DecodeObjectColumn("args", nil); m != nil || bad != nil {
		t.Errorf("SQL null: %v, %v; want nil, nil", m, bad)
	}
}

func TestDecodeResourceJSONMarksOnlyTheBadColumns(t *testing.T) {
	var r domain.Resource
	domain.DecodeResourceJSON(&r, []byte(`{"slots": 1}`), []byte(`[]`), []byte(`{"port": 1e999}`))
	if r.Args["slots"] != float64(1) || r.State != nil || r.Config != nil {
		t.Fatalf("decoded %+v: want args read, state and config nil", r)
	}
	want := "state is not JSON Berth can read: it holds a JSON array, not an object; " +
		"config is not JSON Berth can read: number 1e+999 out of range"
	if r.Readable() || r.ArgsUnreadable() || r.UnreadableReason() != want {
		t.Errorf("unreadable = %q (args unreadable %v), want %q", r.UnreadableReason(), r.ArgsUnreadable(), want)
	}
	domain.DecodeResourceJSON(&r, []byte(`{}`), []byte(`{}`), []byte(`{}`))
	if !r.Readable() {
		t.Errorf("decoding good columns again left %v", r.Unreadable)
	}
}

// FuzzDecodeObjectColumn checks that no stored value makes decoding panic, and that an
// unreadable value is reported with a short reason that quotes little of it.
func FuzzDecodeObjectColumn(f *testing.F) {
	for _, seed := range []string{
		`{}`, `{"host": "h", "slots": 4}`, `{"host": 1e400}`, `{"n": -0.0e-99999}`, `[1]`, `"s"`, `null`, ``,
		`{"a": {"b": [1e309, 2]}}`, strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
		`{"x": 123456789012345678901234567890e12345678901234567890}`, `{"a": "\ud800"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, bad := domain.DecodeObjectColumn("state", raw)
		if bad == nil {
			return
		}
		if m != nil {
			t.Fatalf("unreadable (%v) yet decoded to %v", bad, m)
		}
		if msg := bad.Error(); !strings.HasPrefix(msg, "state is not JSON Berth can read: ") || len(msg) > 200 {
			t.Fatalf("reason %q: want a short message naming the column", msg)
		}
	})
}
