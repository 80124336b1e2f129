package testkit_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-dev/berth/internal/testkit"
)

func TestModuleRootHoldsGoMod(t *testing.T) {
	root := testkit.ModuleRoot(t)
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(data), "module github.com/berth-dev/berth\n") {
		t.Fatalf("%s/go.mod is not the module's: %.40q", root, data)
	}
}
