package external

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/juju/clock"
	"github.com/juju/worker/v4/catacomb"
)

// SocketEnv is the environment variable that gives a broker the agent starts the path of
// the unix socket to listen on.
const SocketEnv = "BERTH_BROKER_SOCKET"

// stopGrace is how long a broker has to exit after SIGTERM before it gets SIGKILL.
const stopGrace = 5 * time.Second

// supervisor runs a broker process and restarts it whenever it exits, after a backoff that
// doubles from min to max with each exit and falls back to min once the process stayed up
// for max. It is owned by the environ, which kills it on Close.
type supervisor struct {
	catacomb catacomb.Catacomb
	command  []string
	dir      string
	socket   string
	min, max time.Duration
	clock    clock.Clock
	logger   *slog.Logger

	// wanted is closed by Start: the broker starts at the first call that needs it, so
	// that building a provisioner set only to check it (berth check-config) runs nothing.
	wanted    chan struct{}
	startOnce sync.Once

	mu     sync.Mutex
	status supervisorStatus
}

// supervisorStatus is what the supervisor tells of its broker process.
type supervisorStatus struct {
	Running bool
	PID     int
	// Starts counts the processes started; the environ handshakes again with each.
	Starts   int
	Restarts int
	// LastExit says how the last process ended ("" when none did yet).
	LastExit string
	// NextStart is when the next process starts, while none runs.
	NextStart time.Time
}

// newSupervisor returns the supervisor of command, which listens on a socket in a private
// directory once started (Start) and is kept running until Kill.
func newSupervisor(command []string, dir string, min, max time.Duration, clk clock.Clock, logger *slog.Logger) (*supervisor, error) {
	sockDir, err := os.MkdirTemp("", "berth-broker-")
	if err != nil {
		return nil, fmt.Errorf("make the broker's socket directory: %w", err)
	}
	s := &supervisor{command: command, dir: dir, socket: filepath.Join(sockDir, "broker.sock"), min: min, max: max, clock: clk, logger: logger, wanted: make(chan struct{})}
	if err := catacomb.Invoke(catacomb.Plan{Site: &s.catacomb, Work: s.loop}); err != nil {
		os.RemoveAll(sockDir)
		return nil, err
	}
	return s, nil
}

// Start starts the broker unless it runs already (or is waiting to restart).
func (s *supervisor) Start() { s.startOnce.Do(func() { close(s.wanted) }) }

// Kill asks the supervisor to stop its broker and itself.
func (s *supervisor) Kill() { s.catacomb.Kill(nil) }

// Wait waits for the supervisor, and its broker, to stop.
func (s *supervisor) Wait() error { return s.catacomb.Wait() }

// Status returns what the supervisor knows of its broker now.
func (s *supervisor) Status() supervisorStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status
}

func (s *supervisor) loop() error {
	defer os.RemoveAll(filepath.Dir(s.socket))
	select {
	case <-s.catacomb.Dying():
		return s.catacomb.ErrDying()
	case <-s.wanted:
	}
	backoff := s.min
	for {
		started := s.clock.Now()
		exited, err := s.start()
		if err == nil {
			select {
			case <-s.catacomb.Dying():
				s.stop(exited)
				return s.catacomb.ErrDying()
			case err = <-exited:
			}
		}
		if s.clock.Now().Sub(started) >= s.max {
			backoff = s.min
		}
		wait := backoff
		backoff = min(2*backoff, s.max)
		s.exited(err, wait)
		select {
		case <-s.catacomb.Dying():
			return s.catacomb.ErrDying()
		case <-s.clock.After(wait):
		}
	}
}

// start starts one broker process and returns the channel its exit is sent on.
func (s *supervisor) start() (<-chan error, error) {
	// A broker that crashed leaves its socket behind, and binding it again would fail.
	if err := os.Remove(s.socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove the previous broker's socket: %w", err)
	}
	cmd := exec.Command(s.command[0], s.command[1:]...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), SocketEnv+"="+s.socket)
	cmd.SysProcAttr = processAttr()
	out := &lineLogger{logger: s.logger}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = stopGrace
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the broker %q: %w", s.command[0], err)
	}
	s.mu.Lock()
	s.status.Running, s.status.PID, s.status.NextStart = true, cmd.Process.Pid, time.Time{}
	s.status.Starts++
	s.mu.Unlock()
	s.logger.Info("broker started", "pid", cmd.Process.Pid, "socket", s.socket)
	exited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		out.flush()
		exited <- err
	}()
	return exited, nil
}

// stop ends the running broker: SIGTERM to its process group, SIGKILL after stopGrace.
func (s *supervisor) stop(exited <-chan error) {
	pid := s.Status().PID
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-exited:
	case <-s.clock.After(stopGrace):
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		<-exited
	}
	s.mu.Lock()
	s.status.Running, s.status.LastExit = false, "stopped with the agent"
	s.mu.Unlock()
}

// exited records that the broker ended (or did not start) with err, and that the next one
// starts after wait.
func (s *supervisor) exited(err error, wait time.Duration) {
	how := "exited"
	if err != nil {
		how = err.Error()
	}
	s.mu.Lock()
	s.status.Restarts++
	s.status.Running, s.status.LastExit, s.status.NextStart = false, how, s.clock.Now().Add(wait)
	s.mu.Unlock()
	s.logger.Warn("broker stopped: restarting it after a backoff", "how", how, "in", wait)
}

// Report is what /debug/engine shows of the broker process.
func (s *supervisor) Report() map[string]any {
	st := s.Status()
	report := map[string]any{"running": st.Running, "restarts": st.Restarts}
	if st.Running {
		report["pid"] = st.PID
	}
	if st.LastExit != "" {
		report["last_exit"] = st.LastExit
	}
	if !st.NextStart.IsZero() {
		report["next_start"] = st.NextStart.UTC().Format(time.RFC3339)
	}
	return report
}

// lineLogger logs what a broker writes, a line at a time.
type lineLogger struct {
	logger  *slog.Logger
	mu      sync.Mutex
	partial []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			break
		}
		l.logger.Info("broker: " + string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
	if len(l.partial) > maxLogLine {
		l.logger.Info("broker: " + string(l.partial))
		l.partial = nil
	}
	return len(p), nil
}

// maxLogLine bounds a line of the broker's output the logger waits to see the end of.
const maxLogLine = 64 << 10

func (l *lineLogger) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.partial) > 0 {
		l.logger.Info("broker: " + string(l.partial))
		l.partial = nil
	}
}
