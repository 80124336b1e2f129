//go:build linux

package sqlite_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-dev/berth/domain/sqlite"
)

// The test needs Linux's /dev/full; the agent lock's other tests run everywhere.
// A lock file the agent cannot record its process id in is an error, not a lock that names
// no one: Linux's /dev/full opens read-write and takes the lock, but cannot be truncated.
func TestLockAgentReportsAFailureToRecordThePID(t *testing.T) {
	path := filepath.Join(t.TempDir(), "berth.db")
	if err := os.Symlink("/dev/full", path+".agent-lock"); err != nil {
		t.Fatal(err)
	}
	lock, err := sqlite.LockAgent(path)
	if err == nil {
		lock.Release()
		t.Fatal("LockAgent succeeded on a lock file it cannot write")
	}
	if !strings.Contains(err.Error(), "record this agent in "+path+".agent-lock") {
		t.Errorf("error %q does not say the agent could not be recorded in the lock file", err)
	}
}
