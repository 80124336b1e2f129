package backend

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one embedded schema migration.
type Migration struct {
	Version int
	Name    string // the file's name, e.g. 0002_what.sql
	SQL     string
}

// LoadMigrations reads the *.sql files of dir in files, ordered by the version their name
// starts with (0001_name.sql is version 1). Two files of one version, or a name that does
// not start with a positive version, are an error.
func LoadMigrations(files fs.FS, dir string) ([]Migration, error) {
	names, err := fs.Glob(files, path.Join(dir, "*.sql"))
	if err != nil {
		return nil, err
	}
	out := make([]Migration, 0, len(names))
	seen := map[int]string{}
	for _, name := range names {
		base := path.Base(name)
		prefix, _, ok := strings.Cut(base, "_")
		version, err := strconv.Atoi(prefix)
		if !ok || err != nil || version < 1 {
			return nil, fmt.Errorf("migration %s: name must start with a positive version, e.g. 0002_what.sql", base)
		}
		if other, dup := seen[version]; dup {
			return nil, fmt.Errorf("migrations %s and %s have the same version %d", other, base, version)
		}
		seen[version] = base
		body, err := fs.ReadFile(files, name)
		if err != nil {
			return nil, err
		}
		out = append(out, Migration{Version: version, Name: base, SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// buildMigrationsDir is the directory of buildMigrations' files.
const buildMigrationsDir = "testdata/upgrade"

// EmbeddedMigrations is LoadMigrations(files, dir) with the build's own extra migrations
// (buildMigrations: none in a release), ordered by version: the migrations a store of this
// build applies, the newest of which is the schema version it knows.
func EmbeddedMigrations(files fs.FS, dir string) ([]Migration, error) {
	own, err := LoadMigrations(files, dir)
	if err != nil {
		return nil, err
	}
	extra, err := LoadMigrations(buildMigrations, buildMigrationsDir)
	if err != nil {
		return nil, err
	}
	if len(extra) > 0 && len(own) > 0 && extra[0].Version <= own[len(own)-1].Version {
		return nil, fmt.Errorf("build migration %s is not newer than %s", extra[0].Name, own[len(own)-1].Name)
	}
	return append(own, extra...), nil
}

// KnownVersion is the schema version a build with migrations (ordered by version) knows:
// the newest one's, 0 for none.
func KnownVersion(migrations []Migration) int {
	if len(migrations) == 0 {
		return 0
	}
	return migrations[len(migrations)-1].Version
}

// SchemaNewerSQL, followed by a placeholder for a version and ")", is a subquery that has a
// row when the database's schema is newer than that version: a write states "NOT EXISTS (" +
// SchemaNewerSQL + "$n)" in its own statement to be fenced against a newer build's migration
// committed at any time before it, for one probe of schema_migrations' primary key.
const SchemaNewerSQL = `SELECT 1 FROM schema_migrations WHERE version > `
