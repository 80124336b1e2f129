package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// The identity is the file's, whatever path opens it, and another file has another.
func TestDatabaseIdentity(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "berth.db")
	id, err := migratedState(t, path).DatabaseIdentity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if id.Where != "SQLite file "+path || len(id.ID) != 16 {
		t.Errorf("identity %+v", id)
	}
	link := filepath.Join(t.TempDir(), "link.db")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	viaLink, err := migratedState(t, link).DatabaseIdentity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if viaLink.ID != id.ID {
		t.Errorf("the file through a link has the identity %s, through its path %s: want one", viaLink.ID, id.ID)
	}
	other, err := migratedState(t, filepath.Join(dir, "other.db")).DatabaseIdentity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if other.ID == id.ID {
		t.Errorf("two files share the identity %s", id.ID)
	}
}
