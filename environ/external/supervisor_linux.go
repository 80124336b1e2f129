package external

import "syscall"

// processAttr is how a broker process is started: in its own process group, so that
// stopping it stops what it started, and killed with the agent, should the agent die
// without stopping it (kill -9), so that no broker outlives its agent.
func processAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
