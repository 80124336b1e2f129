package postgres

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"text/template"
)

// ClickHouse's statements for the same broker shape on a shared ClickHouse server (20.4
// and newer, whose SQL-driven access control they need): one database and one user per
// resource, the user granted its own database and nothing else. They are kept here, one
// template per step, beside the PostgreSQL statements of sql.go, so that a ClickHouse
// broker is this package's lifecycle with another driver. See the package doc for how
// each step maps.
//
// What differs from PostgreSQL:
//   - a user has no NOLOGIN: hibernating sets HOST NONE (no address may log in) and
//     waking HOST ANY;
//   - the connection limit is the user's max_concurrent_queries_for_user setting, held
//     READONLY so that the user cannot raise it (max_concurrent_queries is the server's);
//   - the password goes as its SHA-256 (IDENTIFIED WITH sha256_hash), never in clear, as
//     the PostgreSQL statements send a SCRAM verifier;
//   - there are no advisory locks: every statement is guarded (IF [NOT] EXISTS) and the
//     agent's reconcile lease keeps one attempt per resource at a time;
//   - with a cluster name every statement runs ON CLUSTER (distributed DDL).

// ClickHouseUser is what the ClickHouse statements of one resource are rendered from.
type ClickHouseUser struct {
	// Name is the user's and the database's name (the resource's objectName).
	Name string
	// PasswordSHA256 is the hex SHA-256 of the password (ClickHousePasswordHash).
	PasswordSHA256 string
	// MaxQueries is the user's max_concurrent_queries_for_user (args.connections).
	MaxQueries int
	// Cluster, when set, makes every statement ON CLUSTER it.
	Cluster string
}

// ClickHouseStep is one step of a resource's life on ClickHouse.
type ClickHouseStep string

// The steps, each a template of statements run in order.
const (
	ClickHouseProvision   ClickHouseStep = "provision"   // Reconcile: user, database, grant, limit, password
	ClickHouseResize      ClickHouseStep = "resize"      // Reconcile of new args
	ClickHouseHibernate   ClickHouseStep = "hibernate"   // Hibernate
	ClickHouseWake        ClickHouseStep = "wake"        // Reconcile of a hibernated resource
	ClickHouseDeprovision ClickHouseStep = "deprovision" // Deprovision
	ClickHouseCheck       ClickHouseStep = "check"       // CheckResource: one row of what exists
)

// clickhouseSQL holds the templates, one statement a line. Identifiers go through
// chIdent, strings through chString, numbers as numbers.
var clickhouseSQL = template.Must(template.New("clickhouse").Funcs(template.FuncMap{
	"ident": chIdent, "str": chString,
}).Parse(`
{{- define "on"}}{{if .Cluster}} ON CLUSTER {{ident .Cluster}}{{end}}{{end}}
{{- define "limit"}}SETTINGS max_concurrent_queries_for_user = {{.MaxQueries}} READONLY{{end}}

{{- define "provision"}}
CREATE USER IF NOT EXISTS {{ident .Name}}{{template "on" .}} IDENTIFIED WITH sha256_hash BY {{str .PasswordSHA256}} HOST ANY DEFAULT DATABASE {{ident .Name}} {{template "limit" .}}
CREATE DATABASE IF NOT EXISTS {{ident .Name}}{{template "on" .}}
GRANT{{template "on" .}} ALL ON {{ident .Name}}.* TO {{ident .Name}}
ALTER USER {{ident .Name}}{{template "on" .}} IDENTIFIED WITH sha256_hash BY {{str .PasswordSHA256}} HOST ANY {{template "limit" .}}
{{- end}}

{{- define "resize"}}
ALTER USER {{ident .Name}}{{template "on" .}} {{template "limit" .}}
{{- end}}

{{- define "hibernate"}}
ALTER USER {{ident .Name}}{{template "on" .}} HOST NONE
KILL QUERY{{template "on" .}} WHERE user = {{str .Name}} ASYNC
{{- end}}

{{- define "wake"}}
ALTER USER {{ident .Name}}{{template "on" .}} HOST ANY
{{- end}}

{{- define "deprovision"}}
ALTER USER IF EXISTS {{ident .Name}}{{template "on" .}} HOST NONE
KILL QUERY{{template "on" .}} WHERE user = {{str .Name}} ASYNC
DROP DATABASE IF EXISTS {{ident .Name}}{{template "on" .}}
DROP USER IF EXISTS {{ident .Name}}{{template "on" .}}
{{- end}}

{{- define "check"}}
SELECT (SELECT count() FROM system.users WHERE name = {{str .Name}}) AS user_exists, (SELECT count() FROM system.databases WHERE name = {{str .Name}}) AS database_exists, (SELECT count() FROM system.grants WHERE user_name = {{str .Name}} AND (database IS NULL OR database != {{str .Name}})) AS grants_elsewhere
{{- end}}
`))

var clickhouseName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Statements renders step for u, one statement per element. A name the templates could
// not quote safely, or a password hash that is not one, is refused.
func (u ClickHouseUser) Statements(step ClickHouseStep) ([]string, error) {
	switch {
	case !clickhouseName.MatchString(u.Name):
		return nil, fmt.Errorf("clickhouse user %q: a name is letters, digits and _", u.Name)
	case u.Cluster != "" && !clickhouseName.MatchString(u.Cluster):
		return nil, fmt.Errorf("clickhouse cluster %q: a name is letters, digits and _", u.Cluster)
	case step == ClickHouseProvision && !isSHA256Hex(u.PasswordSHA256):
		return nil, fmt.Errorf("clickhouse user %s: the password hash is not 64 hex digits", u.Name)
	case (step == ClickHouseProvision || step == ClickHouseResize) && u.MaxQueries < 1:
		return nil, fmt.Errorf("clickhouse user %s: max queries must be at least 1, got %d", u.Name, u.MaxQueries)
	}
	var b strings.Builder
	if err := clickhouseSQL.ExecuteTemplate(&b, string(step), u); err != nil {
		return nil, fmt.Errorf("render the clickhouse %s statements: %w", step, err)
	}
	var out []string
	for _, line := range strings.Split(b.String(), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out, nil
}

// ClickHousePasswordHash is the hex SHA-256 that IDENTIFIED WITH sha256_hash takes.
func ClickHousePasswordHash(password string) string {
	sum := sha256.Sum256([]byte(password))
	return hex.EncodeToString(sum[:])
}

func isSHA256Hex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil && len(s) == 64
}

// chIdent quotes a ClickHouse identifier with backquotes.
func chIdent(s string) string {
	return "`" + strings.NewReplacer(`\`, `\\`, "`", "\\`").Replace(s) + "`"
}

// chString quotes a ClickHouse string literal.
func chString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
