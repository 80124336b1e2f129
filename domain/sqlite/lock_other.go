//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package sqlite

import (
	"errors"
	"os"
	"runtime"
)

// errLocked is lockFile's error when another holder has the lock.
var errLocked = errors.New("locked by another process")

// lockFile refuses: without flock an agent cannot make sure it is the file's only agent.
func lockFile(*os.File) error {
	return errors.New("this system (" + runtime.GOOS + ") cannot lock the file; run the agent on PostgreSQL")
}
