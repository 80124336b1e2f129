package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	provisionerName = "bench-pool"
	slotsPerHost    = 1000
	minHosts        = 12
	// stopGrace is how long the agent gets after SIGTERM; its own shutdown timeout is 30s.
	stopGrace = 40 * time.Second
)

// agent is a running Berth agent process.
type agent struct {
	id     string
	cmd    *exec.Cmd
	log    *tailBuffer
	exited chan struct{} // closed when the process has exited
	err    error         // the process's exit error; read after exited is closed
	killed bool          // killed on purpose (kill), so its exit is no failure
}

// migrate applies Berth's schema to the database with the agent binary.
func migrate(ctx context.Context, binary, dbURL string) error {
	cmd := exec.CommandContext(ctx, binary, "migrate")
	cmd.Env = append(os.Environ(), "BERTH_DATABASE_URL="+dbURL)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s migrate: %w\n%s", binary, err, out)
	}
	return nil
}

// hasRunFlag says whether binary's berth run takes flag, so that the bench can measure
// builds from before the flag was added.
func hasRunFlag(binary, flag string) bool {
	out, err := exec.Command(binary, "run", "--help").CombinedOutput()
	return err == nil && strings.Contains(string(out), flag+" ")
}

// startAgent starts the agent with agent id on the database with the provisioner set (JSON
// naming provisionerName, its default), then the extra flags of berth run. Its HTTP server
// takes a port of its own, so that several agents run side by side. The caller must stop it.
func startAgent(binary, dbURL, id, set string, concurrency int, extra ...string) (*agent, error) {
	args := append([]string{"run", "--agent-id", id, "--concurrency", strconv.Itoa(concurrency), "--http-addr", "127.0.0.1:0"}, extra...)
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(),
		"BERTH_DATABASE_URL="+dbURL,
		"BERTH_PROVISIONER_SET_JSON="+set,
		"BERTH_DEFAULT_PROVISIONER="+provisionerName,
		"BERTH_LOG_LEVEL=warn", // as River's client logs in the bench
	)
	a := &agent{id: id, cmd: cmd, log: &tailBuffer{max: 16 << 10}, exited: make(chan struct{})}
	cmd.Stdout = a.log
	cmd.Stderr = a.log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the agent %s (build it with make build, or set BERTH_BINARY): %w", binary, err)
	}
	go func() {
		a.err = cmd.Wait()
		close(a.exited)
	}()
	return a, nil
}

// alive returns an error when the agent has exited, unless it was killed on purpose.
func (a *agent) alive() error {
	if a.killed {
		return nil
	}
	select {
	case <-a.exited:
		return fmt.Errorf("the agent %s exited early (%v); its last output:\n%s", a.id, a.err, a.log)
	default:
		return nil
	}
}

// kill sends SIGKILL, as a crash would end the agent, and waits until it is gone.
func (a *agent) kill() error {
	a.killed = true
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill the agent %s: %w", a.id, err)
	}
	<-a.exited
	return nil
}

// peakRSS is the agent's peak resident set size in bytes (VmHWM).
func (a *agent) peakRSS() (int64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", a.cmd.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("read the agent's peak RSS (needs Linux /proc): %w", err)
	}
	return vmHWM(status)
}

// cpuTime is the CPU time the agent has used so far, user and system (utime and stime of
// /proc/<pid>/stat).
func (a *agent) cpuTime() (time.Duration, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", a.cmd.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("read the agent's CPU time (needs Linux /proc): %w", err)
	}
	return statCPUTime(stat)
}

// clockTicks is the unit of /proc/<pid>/stat's CPU times: USER_HZ, 100 on Linux.
const clockTicks = 100

// statCPUTime parses utime and stime, the 14th and 15th fields, of a /proc/<pid>/stat file.
// The fields are counted after the command name's closing parenthesis, since the name may
// hold spaces.
func statCPUTime(stat []byte) (time.Duration, error) {
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("no command name in the agent's /proc stat")
	}
	fields := strings.Fields(string(stat[end+1:]))
	// fields[0] is the 3rd field (state): utime and stime are fields[11] and fields[12].
	if len(fields) < 13 {
		return 0, fmt.Errorf("the agent's /proc stat has %d fields after its name, want at least 13", len(fields))
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse the agent's CPU time %q: %w", f, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// stop sends SIGTERM and waits; after stopGrace it kills the agent. An agent that had
// already exited is not reported again (alive reports it).
func (a *agent) stop() error {
	if a.killed || a.alive() != nil {
		return nil
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.exited:
	case <-time.After(stopGrace):
		_ = a.cmd.Process.Kill()
		<-a.exited
		return fmt.Errorf("the agent did not stop within %s of SIGTERM and was killed", stopGrace)
	}
	var exit *exec.ExitError
	if errors.As(a.err, &exit) && !exit.Success() {
		return fmt.Errorf("the agent %s exited with %v on SIGTERM; its last output:\n%s", a.id, a.err, a.log)
	}
	return nil
}

// rss is the agent's resident set size in bytes now (VmRSS).
func (a *agent) rss() (int64, error) {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", a.cmd.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("read the agent's RSS (needs Linux /proc): %w", err)
	}
	return statusBytes(status, "VmRSS")
}

// vmHWM parses the VmHWM line of a /proc/<pid>/status file.
func vmHWM(status []byte) (int64, error) { return statusBytes(status, "VmHWM") }

// statusBytes parses the line of field, a size in kB, of a /proc/<pid>/status file.
func statusBytes(status []byte, field string) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 && fields[0] == field+":" && fields[2] == "kB" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse %s %q: %w", field, fields[1], err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no %s line in the agent's /proc status", field)
}

// provisionerSet is the agent's provisioner-set JSON: one static pool of hosts offering
// slotsPerHost slots each, at least minHosts of them and enough for slots.
func provisionerSet(slots int) (string, error) {
	type runtime struct {
		Host        string `json:"host"`
		Slots       int    `json:"slots"`
		DataDir     string `json:"data_dir"`
		AudienceURL string `json:"audience_url"`
	}
	hosts := max(minHosts, (slots+slotsPerHost-1)/slotsPerHost)
	runtimes := make([]runtime, hosts)
	for i := range runtimes {
		runtimes[i] = runtime{
			Host:        fmt.Sprintf("http://host-%02d.bench:9091", i),
			Slots:       slotsPerHost,
			DataDir:     "/mnt/data",
			AudienceURL: fmt.Sprintf("http://host-%02d.bench:8081", i),
		}
	}
	// The hosts are names, not servers: health probes are off, or every host would be down
	// and nothing placed. (The health sweep serves its hosts and probes them.)
	set := map[string]any{provisionerName: map[string]any{
		"type": "static",
		"spec": map[string]any{"runtimes": runtimes, "health_path": ""},
	}}
	out, err := json.Marshal(set)
	return string(out), err
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
