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
