//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package sqlite

import "time"

// shortSleep sleeps about d, which is under a millisecond (as the timer's resolution
// allows here).
func shortSleep(d time.Duration) { time.Sleep(d) }
