package postgres

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

func TestParseSpecNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		spec, field, says string
	}{
		{``, "spec", "is missing"},
		{`[]`, "spec", "must be a JSON object"},
		{`{"password_dir": "/p"}`, "dsn_env", "is required (or dsn_file)"},
		{`{"dsn_env": "X", "dsn_file": "/f", "password_dir": "/p"}`, "dsn_file", "give one of them"},
		{`{"dsn_file": "dsn.txt", "password_dir": "/p"}`, "dsn_file", "absolute path"},
		{`{"dsn_env": "X"}`, "password_dir", "is required"},
		{`{"dsn_env": "X", "password_dir": "p"}`, "password_dir", "absolute path"},
		{`{"dsn_env": "X", "password_dir": "/p", "port": 70000}`, "port", "1 to 65535"},
		{`{"dsn_env": "X", "password_dir": "/p", "name_prefix": "Berth-"}`, "name_prefix", "lower-case letter"},
		{`{"dsn_env": "X", "password_dir": "/p", "name_prefix": "a_very_long_prefix_for_names_"}`, "name_prefix", "at most 24"},
		{`{"dsn_env": "X", "password_dir": "/p", "max_connections": -1}`, "max_connections", "must be 1 to 10000"},
		{`{"dsn_env": "X", "password_dir": "/p", "dsn": "postgres://u:p@h/db"}`, "dsn", "unknown field"},
		{`{"dsn_env": 5, "password_dir": "/p"}`, "dsn_env", "must be a string"},
	} {
		_, err := ParseSpec(json.RawMessage(tc.spec))
		var fe *domain.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(fe.Msg, tc.says) {
			t.Errorf("ParseSpec(%s) = %v; want field %s saying %q", tc.spec, err, tc.field, tc.says)
		}
	}
	spec, err := ParseSpec(json.RawMessage(`{"dsn_env": "X", "password_dir": "/p"}`))
	if err != nil || spec.NamePrefix != DefaultNamePrefix || spec.MaxConnections != DefaultMaxConnections || spec.AdminConnections != DefaultAdminConnections {
		t.Errorf("ParseSpec with defaults = %+v, %v", spec, err)
	}
}

// A provisioner set of type postgres builds through the registry, and one whose DSN
// reference is broken fails naming the provisioner and the field, never the DSN.
func TestProvisionerSetOfTypePostgres(t *testing.T) {
	r := environ.NewRegistry()
	r.Register(Type, New, Types...)
	t.Setenv("BERTH_TEST_SET_DSN", "postgres://admin:Set-Secret-1@db.example:5433/postgres")
	set, err := r.NewSet([]byte(`{"shared-pg": {"type": "postgres", "spec": {"dsn_env": "BERTH_TEST_SET_DSN", "password_dir": "/var/lib/berth/pg"}}}`), "", environ.Deps{})
	if err != nil {
		t.Fatalf("NewSet: %v", err)
	}
	env, _, _ := set.Get("")
	if !env.Supports(Name) || env.Supports(domain.ResourceTypeRuntime) {
		t.Errorf("the environ does not serve postgres alone")
	}
	if got := env.(*pgEnviron).Summary(); got != "databases on db.example:5433, names berth_*, passwords in /var/lib/berth/pg" {
		t.Errorf("Summary = %q", got)
	}
	set.Close()

	for _, tc := range []struct{ spec, want string }{
		{`{"dsn_env": "BERTH_TEST_UNSET_DSN", "password_dir": "/p"}`, `provisioner "shared-pg" (postgres), line 1, column 56: dsn_env: environment variable BERTH_TEST_UNSET_DSN is unset or empty`},
		{`{"dsn_file": "` + filepath.Join(t.TempDir(), "missing") + `", "password_dir": "/p"}`, "dsn_file: cannot read"},
	} {
		_, err := r.NewSet([]byte(`{"shared-pg": {"type": "postgres", "spec": `+tc.spec+`}}`), "", environ.Deps{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewSet(%s) = %v, want %q", tc.spec, err, tc.want)
		}
	}
	t.Setenv("BERTH_TEST_SET_DSN", "postgres://admin:Set-Secret-1@db.example:port/postgres")
	_, err = r.NewSet([]byte(`{"shared-pg": {"type": "postgres", "spec": {"dsn_env": "BERTH_TEST_SET_DSN", "password_dir": "/p"}}}`), "", environ.Deps{})
	if err == nil || strings.Contains(err.Error(), "Set-Secret-1") || !strings.Contains(err.Error(), "does not parse") {
		t.Errorf("NewSet with a DSN that does not parse = %v; want it said without the password", err)
	}
}

func TestArgs(t *testing.T) {
	if a, err := DecodeArgs(nil); err != nil || a.Connections != DefaultConnections {
		t.Errorf("DecodeArgs(nil) = %+v, %v", a, err)
	}
	for _, tc := range []struct {
		args  map[string]any
		field string
	}{
		{map[string]any{"connections": 0}, "args.connections"},
		{map[string]any{"connections": 2.5}, "args.connections"},
		{map[string]any{"connections": "5"}, "args.connections"},
		{map[string]any{"size": 1}, "args.size"},
	} {
		var fe *domain.FieldError
		if _, err := DecodeArgs(tc.args); !errors.As(err, &fe) || fe.Field != tc.field {
			t.Errorf("DecodeArgs(%v) = %v, want an error on %s", tc.args, err, tc.field)
		}
	}
}

// Names are the prefix and the id's hex digits for a UUID, and a hash for any other id:
// safe to quote, within PostgreSQL's 63 bytes, and one per id.
func TestObjectNames(t *testing.T) {
	e := &pgEnviron{spec: &Spec{NamePrefix: "berth_"}}
	if got := e.objectName("0b5c7a4e-2f1d-4c3b-9a8e-7d6c5b4a3f21"); got != "berth_0b5c7a4e2f1d4c3b9a8e7d6c5b4a3f21" {
		t.Errorf("name of a UUID = %q", got)
	}
	odd := e.objectName(`x"; DROP ROLE postgres; --`)
	if !strings.HasPrefix(odd, "berth_id_") || len(odd) != len("berth_id_")+24 || strings.Trim(odd[len("berth_id_"):], "0123456789abcdef") != "" {
		t.Errorf("name of an odd id = %q", odd)
	}
	if e.objectName("a") == e.objectName("A") {
		t.Errorf("two ids share a name")
	}
	if got := ident(`a"b`); got != `"a""b"` {
		t.Errorf("ident quotes %q", got)
	}
}
