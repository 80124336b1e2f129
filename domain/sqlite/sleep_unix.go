//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package sqlite

import (
	"syscall"
	"time"
)

// shortSleep sleeps about d, which is under a millisecond, in a system call that blocks
// the calling thread: a Go timer that fires on an otherwise idle process is seen a
// millisecond or more after it is due (the runtime waits for it in a system call of
// millisecond resolution), nanosleep 60 to 100 us after.
func shortSleep(d time.Duration) {
	ts := syscall.NsecToTimespec(d.Nanoseconds())
	_ = syscall.Nanosleep(&ts, nil) // interrupted: the caller tries again sooner
}
