package postgres

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ/internal/specjson"
)

// Defaults a spec gets for the fields it leaves out.
const (
	DefaultNamePrefix     = "berth_"
	DefaultMaxConnections = 100
	// DefaultAdminConnections is how many connections to the server the environ's work
	// uses at most; as many again hold the resources' advisory locks.
	DefaultAdminConnections = 8
)

// maxPrefix keeps a name (prefix and a 32-character id) within PostgreSQL's 63 bytes.
const maxPrefix = 24

var prefixPattern = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// Spec is the JSON spec of a postgres provisioner: the shared server, by reference, and
// where the roles' passwords are kept.
//
//	{"dsn_env": "SHARED_PG_DSN", "password_dir": "/var/lib/berth/pg-passwords"}
type Spec struct {
	// DSNEnv names the environment variable that holds the admin DSN; DSNFile names a
	// file holding it. Exactly one is given: the DSN's password is never in the spec.
	DSNEnv  string `json:"dsn_env"`
	DSNFile string `json:"dsn_file"`
	// PasswordDir is the directory of the roles' password files, one per resource, mode
	// 0600. Clients read the file the config names.
	PasswordDir string `json:"password_dir"`
	// Host and Port are what clients are told to connect to; by default the DSN's.
	Host string `json:"host"`
	Port int    `json:"port"`
	// NamePrefix starts every database and role name the provisioner makes.
	NamePrefix string `json:"name_prefix"`
	// MaxConnections bounds a resource's args.connections.
	MaxConnections int `json:"max_connections"`
	// AdminConnections bounds the environ's own connections to the server.
	AdminConnections int `json:"admin_connections"`
}

// ParseSpec decodes raw strictly and validates it. Errors are *domain.FieldError naming the
// field and the fix. It reads nothing the spec refers to.
func ParseSpec(raw json.RawMessage) (*Spec, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return nil, &domain.FieldError{Field: "spec", Msg: `is missing: give at least {"dsn_env": "VAR", "password_dir": "/DIR"}`}
	}
	spec := Spec{}
	if err := specjson.DecodeObject("spec", "", trimmed, []specjson.Field{
		{Name: "dsn_env", Dst: &spec.DSNEnv},
		{Name: "dsn_file", Dst: &spec.DSNFile},
		{Name: "password_dir", Dst: &spec.PasswordDir},
		{Name: "host", Dst: &spec.Host},
		{Name: "port", Dst: &spec.Port},
		{Name: "name_prefix", Dst: &spec.NamePrefix},
		{Name: "max_connections", Dst: &spec.MaxConnections},
		{Name: "admin_connections", Dst: &spec.AdminConnections},
	}); err != nil {
		return nil, err
	}
	if err := spec.validate(); err != nil {
		return nil, err
	}
	return &spec, nil
}

func (s *Spec) validate() error {
	switch {
	case s.DSNEnv == "" && s.DSNFile == "":
		return &domain.FieldError{Field: "dsn_env", Msg: "is required (or dsn_file): name the environment variable that holds the admin DSN, e.g. \"SHARED_PG_DSN\"; the DSN itself never goes in the spec"}
	case s.DSNEnv != "" && s.DSNFile != "":
		return &domain.FieldError{Field: "dsn_file", Msg: "is given with dsn_env: give one of them"}
	case s.DSNFile != "" && !filepath.IsAbs(s.DSNFile):
		return &domain.FieldError{Field: "dsn_file", Msg: fmt.Sprintf("must be an absolute path, got %q", s.DSNFile)}
	case s.PasswordDir == "":
		return &domain.FieldError{Field: "password_dir", Msg: "is required: the directory where each role's password file is kept (mode 0600)"}
	case !filepath.IsAbs(s.PasswordDir):
		return &domain.FieldError{Field: "password_dir", Msg: fmt.Sprintf("must be an absolute path, got %q", s.PasswordDir)}
	case s.Port < 0 || s.Port > 65535:
		return &domain.FieldError{Field: "port", Msg: fmt.Sprintf("must be a TCP port, 1 to 65535, got %d; or leave it out for the DSN's", s.Port)}
	}
	if s.NamePrefix == "" {
		s.NamePrefix = DefaultNamePrefix
	}
	if !prefixPattern.MatchString(s.NamePrefix) || len(s.NamePrefix) > maxPrefix {
		return &domain.FieldError{Field: "name_prefix", Msg: fmt.Sprintf("must be a lower-case letter then letters, digits or _, at most %d characters, got %q", maxPrefix, s.NamePrefix)}
	}
	if err := positive("max_connections", &s.MaxConnections, DefaultMaxConnections, MaxConnections); err != nil {
		return err
	}
	return positive("admin_connections", &s.AdminConnections, DefaultAdminConnections, 1000)
}

func positive(field string, v *int, def, hi int) error {
	switch {
	case *v == 0:
		*v = def
	case *v < 0 || *v > hi:
		return &domain.FieldError{Field: field, Msg: fmt.Sprintf("must be 1 to %d, got %d; leave it out for the default of %d", hi, *v, def)}
	}
	return nil
}

// poolConfig reads the admin DSN the spec refers to and parses it. Its errors name the
// reference, never the DSN's text.
func (s *Spec) poolConfig() (*pgxpool.Config, error) {
	field, dsn := "dsn_env", ""
	if s.DSNEnv != "" {
		dsn = os.Getenv(s.DSNEnv)
		if strings.TrimSpace(dsn) == "" {
			return nil, &domain.FieldError{Field: field, Msg: fmt.Sprintf("environment variable %s is unset or empty: set it to the admin DSN (postgres://USER:PASSWORD@HOST:PORT/DB)", s.DSNEnv)}
		}
	} else {
		field = "dsn_file"
		data, err := os.ReadFile(s.DSNFile)
		if err != nil {
			return nil, &domain.FieldError{Field: field, Msg: fmt.Sprintf("cannot read %s: %v", s.DSNFile, pathError(err))}
		}
		dsn = strings.TrimSpace(string(data))
		if dsn == "" {
			return nil, &domain.FieldError{Field: field, Msg: fmt.Sprintf("%s is empty: write the admin DSN in it", s.DSNFile)}
		}
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgx's message quotes the DSN (its password masked, but not every spelling of it).
		return nil, &domain.FieldError{Field: field, Msg: "the admin DSN it holds does not parse: write it as postgres://USER:PASSWORD@HOST:PORT/DB or as key=value pairs"}
	}
	return cfg, nil
}

// pathError is what an *os.PathError says beside the path (the path is already named).
func pathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}
