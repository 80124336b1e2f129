package sqlite_test

import (
	"errors"
	"os"
	"path/filepath"
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
