package sqlite

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// AgentRunningError says another agent holds the database file's agent lock.
type AgentRunningError struct {
	Path string // the database file
	PID  int    // the holder's process id; 0 when it could not be read
}

func (e *AgentRunningError) Error() string {
	holder := "another berth agent"
	if e.PID > 0 {
		holder += " (pid " + strconv.Itoa(e.PID) + ")"
	}
	return holder + " is already running on " + e.Path + "; SQLite serves one agent — use PostgreSQL to run several"
}

// AgentLock is an agent's hold on a database file: while it is held, LockAgent refuses every
// other agent on the file. The operating system drops it when the process ends, however it
// ends, so a crashed agent never leaves the file locked.
type AgentLock struct {
	file *os.File
}

// LockAgent takes the agent lock of the database file at path: an exclusive lock on the file
// path + ".agent-lock", which records the holder's process id. It gives an
// *AgentRunningError when another agent holds it.
func LockAgent(path string) (*AgentLock, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("lock database file %s: %w", path, err)
	}
	lockPath := abs + ".agent-lock"
	f, err := os.OpenFile(lockPath, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock database file %s: %w", abs, err)
	}
	if err := lockFile(f); err != nil {
		if errors.Is(err, errLocked) {
			pid := readPID(f)
			f.Close()
			return nil, &AgentRunningError{Path: abs, PID: pid}
		}
		f.Close()
		return nil, fmt.Errorf("lock database file %s (lock file %s): %w", abs, lockPath, err)
	}
	if err = f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock database file %s: record this agent in %s: %w", abs, lockPath, err)
	}
	return &AgentLock{file: f}, nil
}

// Release gives the lock up.
func (l *AgentLock) Release() error {
	return l.file.Close()
}

func readPID(f *os.File) int {
	buf := make([]byte, 32)
	n, _ := f.ReadAt(buf, 0)
	pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		return 0
	}
	return pid
}
