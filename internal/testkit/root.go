package testkit

import (
	"errors"
	"os"
	"path/filepath"
)

// FindModuleRoot returns the directory holding the module's go.mod, the nearest one above
// the working directory (a test's package folder), for tests and test helpers that read the
// repository's files (the README, the Dockerfile, scripts, every package).
func FindModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// ModuleRoot is FindModuleRoot for a test: it fails the test when there is none.
func ModuleRoot(f Fataler) string {
	root, err := FindModuleRoot()
	if err != nil {
		f.Fatalf("the module's root: %v", err)
	}
	return root
}
