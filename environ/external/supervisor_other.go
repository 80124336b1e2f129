//go:build !linux

package external

import "syscall"

// processAttr is how a broker process is started: in its own process group, so that
// stopping it stops what it started. Only Linux can also kill it with the agent.
func processAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
