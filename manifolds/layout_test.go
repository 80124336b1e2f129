package manifolds_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/berth-dev/berth/internal/testkit"
)

const module = "github.com/berth-dev/berth/"

// layers says, for each folder of the module (by the longest matching prefix), which of the
// module's packages its non-test files may import: imports flow one way, down, as the
// README's code layout draws them.
var layers = []struct {
	dir     string
	imports []string
}{
	{"cmd/agent", []string{"manifolds", "domain", "environ"}},
	{"cmd/", []string{"internal"}},
	{"manifolds", []string{"worker", "metrics", "watcher", "environ", "domain", "internal"}},
	{"worker", []string{"worker", "metrics", "watcher", "environ", "domain", "internal"}},
	{"metrics", []string{"environ", "domain", "internal"}},
	{"watcher", []string{"environ", "domain", "internal"}},
	{"environ", []string{"environ", "domain", "internal"}},
	{"domain", []string{"domain", "internal"}},
	{"internal", []string{"internal"}},
	{"bench", []string{"worker", "metrics", "watcher", "environ", "domain", "internal"}},
	{"e2e", []string{"internal"}},
	{"deploy", nil},
}

func layerOf(dir string) (allowed []string, ok bool) {
	best := -1
	for i, l := range layers {
		if (dir == strings.TrimSuffix(l.dir, "/") || strings.HasPrefix(dir, strings.TrimSuffix(l.dir, "/")+"/")) &&
			(best < 0 || len(l.dir) > len(layers[best].dir)) {
			best = i
		}
	}
	if best < 0 {
		return nil, false
	}
	return layers[best].imports, true
}

func within(pkg, top string) bool {
	return pkg == top || strings.HasPrefix(pkg, top+"/")
}

func TestImportsFlowDown(t *testing.T) {
	root := testkit.ModuleRoot(t)
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		allowed, ok := layerOf(rel)
		if !ok {
			t.Errorf("%s: folder %s has no layer: add it to layers", path, rel)
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, spec := range f.Imports {
			imp, _ := strconv.Unquote(spec.Path.Value)
			if !strings.HasPrefix(imp, module) {
				continue
			}
			imp = strings.TrimPrefix(imp, module)
			if within(imp, rel) {
				continue
			}
			fine := false
			for _, top := range allowed {
				fine = fine || within(imp, top)
			}
			if !fine {
				t.Errorf("%s/%s imports %s: %s may import only %v", rel, filepath.Base(path), imp, rel, allowed)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked only %d files under %s: is the walk reading the module?", checked, root)
	}
}
