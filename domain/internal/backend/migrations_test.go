package backend_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/berth-dev/berth/domain/internal/backend"
)

func TestLoadMigrationsOrdersByVersion(t *testing.T) {
	files := fstest.MapFS{
		"m/0010_late.sql":  {Data: []byte("late")},
		"m/0002_early.sql": {Data: []byte("early")},
		"m/notes.txt":      {Data: []byte("not a migration")},
	}
	got, err := backend.LoadMigrations(files, "m")
	if err != nil {
		t.Fatal(err)
	}
	want := []backend.Migration{{Version: 2, Name: "0002_early.sql", SQL: "early"}, {Version: 10, Name: "0010_late.sql", SQL: "late"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestLoadMigrationsRefusesBadNames(t *testing.T) {
	for name, tc := range map[string]struct {
		files fstest.MapFS
		want  string
	}{
		"no version":     {fstest.MapFS{"m/init.sql": {}}, "name must start with a positive version"},
		"version zero":   {fstest.MapFS{"m/0000_x.sql": {}}, "name must start with a positive version"},
		"shared version": {fstest.MapFS{"m/0001_a.sql": {}, "m/1_b.sql": {}}, "have the same version 1"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := backend.LoadMigrations(tc.files, "m")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
