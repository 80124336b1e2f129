package sqlite_test

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/berth-dev/berth/domain/sqlite"
)

func TestLockAgentAdmitsOneAgentPerFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "berth.db")
	first, err := sqlite.LockAgent(path)
	if err != nil {
		t.Fatalf("first lock: %v", err)
	}
	_, err = sqlite.LockAgent(path)
	var running *sqlite.AgentRunningError
	if !errors.As(err, &running) || running.PID != os.Getpid() || running.Path != path {
		t.Fatalf("second lock: %v, want an AgentRunningError naming pid %d and %s", err, os.Getpid(), path)
	}
	for _, part := range []string{"pid " + strconv.Itoa(os.Getpid()), path, "use PostgreSQL to run several"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("second lock error %q does not say %q", err, part)
		}
	}
	other, err := sqlite.LockAgent(filepath.Join(t.TempDir(), "other.db"))
	if err != nil {
		t.Fatalf("lock of another file: %v", err)
	}
	if err := other.Release(); err != nil {
		t.Fatal(err)
	}

	if err := first.Release(); err != nil {
		t.Fatalf("release: %v", err)
	}
	again, err := sqlite.LockAgent(path)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	if err := again.Release(); err != nil {
		t.Fatal(err)
	}
}

// A lock file the agent cannot record its process id in is an error, not a lock that names
// no one: /dev/full opens read-write and takes the lock, but cannot be truncated.
func TestLockAgentReportsAFailureToRecordThePID(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs Linux's /dev/full")
	}
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
