package quickstart_test

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/testkit"
)

// Markers README.md puts on the line before each quick-start block.
const (
	agentMarker  = "<!-- quickstart: agent -->"
	clientMarker = "<!-- quickstart: client -->"
	nextMarker   = "<!-- quickstart: next -->"
)

const (
	readyTimeout   = 5 * time.Minute // make run may have to build bin/berth first
	commandTimeout = 2 * time.Minute
	stopTimeout    = time.Minute
)

func TestReadmeQuickStart(t *testing.T) {
	root := testkit.ModuleRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	agentBlock := shellBlock(t, string(readme), agentMarker)
	commands := shellCommands(shellBlock(t, string(readme), clientMarker))
	next := shellCommands(shellBlock(t, string(readme), nextMarker))

	agentAddr := freeAddr(t)
	env := quickstartEnv(t, t.TempDir(), agentAddr)
	home := envValue(env, "HOME")

	agent := startAgentBlock(t, root, env, agentBlock)
	agent.waitReady(t, agentAddr)

	clientSteps := []string{"resource create", "resource get", "capacity", "resource events", "resource delete"}
	outputs := runSteps(t, root, env, commands, clientSteps)
	created := outputs["resource create"]
	host := regexp.MustCompile(`(?m)^\s*host:\s+(http://127\.0\.0\.1:\d+)\s*$`).FindStringSubmatch(created)
	if !strings.Contains(created, "status ready") || host == nil || !regexp.MustCompile(`(?m)^\s*cpu:\s+\d+`).MatchString(created) {
		t.Errorf("create --wait should show a ready resource with its host and config, printed:\n%s", created)
	}
	got := outputs["resource get"]
	if !regexp.MustCompile(`(?m)^status:\s+ready$`).MatchString(got) || !regexp.MustCompile(`(?m)^config:.*host=http://127\.0\.0\.1:\d+`).MatchString(got) {
		t.Errorf("get should show the ready resource and its config, printed:\n%s", got)
	}
	capacity := outputs["capacity"]
	if !regexp.MustCompile(`(?m)^\S+\s+\(total\)\s+slots\s+12\s+2\s+10\s`).MatchString(capacity) {
		t.Errorf("capacity right after create should show 2 of the pool's 12 slots used, as the README says, printed:\n%s", capacity)
	}
	if host != nil && !regexp.MustCompile(`(?m)^\S+\s+`+regexp.QuoteMeta(host[1])+`\s+slots\s+4\s+2\s+2\s`).MatchString(capacity) {
		t.Errorf("capacity should show the runtime's 2 slots used on its host %s, printed:\n%s", host[1], capacity)
	}
	if strings.Contains(capacity, " down ") {
		t.Errorf("a dev host is down:\n%s", capacity)
	}
	if !regexp.MustCompile(`(?m)\bready\b`).MatchString(outputs["resource events"]) {
		t.Errorf("events should show the resource's history up to ready, printed:\n%s", outputs["resource events"])
	}
	if !strings.Contains(outputs["resource delete"], "deleted") {
		t.Errorf("delete --wait should report the resource deleted, printed:\n%s", outputs["resource delete"])
	}

	// The Next steps, with the agent on a port of its own (RUN_ARGS --http-addr, as the
	// README tells a reader whose 9090 is taken): status finds it without being told where.
	outputs = runSteps(t, root, env, next, []string{"status", "agents", "--help"})
	status := outputs["status"]
	if !regexp.MustCompile(`(?m)^agent: \S+ \(the leader\) on `+regexp.QuoteMeta(agentAddr)+`$`).MatchString(status) ||
		!regexp.MustCompile(`(?m)^database: SQLite file `+regexp.QuoteMeta(home)+`\S+ \(id [0-9a-f]{16}, the CLI's database\)$`).MatchString(status) ||
		!regexp.MustCompile(`(?m)^provisioner\s+started\s`).MatchString(status) {
		t.Errorf("status should find the leader on %s, on the CLI's database in %s, with its workers, printed:\n%s", agentAddr, home, status)
	}
	if !strings.Contains(outputs["agents"], agentAddr) {
		t.Errorf("agents should list the agent on %s, printed:\n%s", agentAddr, outputs["agents"])
	}
	if !strings.Contains(outputs["--help"], "status") {
		t.Errorf("--help should list the commands, printed:\n%s", outputs["--help"])
	}

	agent.interrupt(t)
	logs := agent.logs.String()
	// The README tells the reader which log line to wait for before the second terminal.
	readyLine := regexp.MustCompile("When the log says `([^`]+)`").FindStringSubmatch(string(readme))
	if readyLine == nil {
		t.Error("README.md no longer says which log line (\"When the log says `...`\") to wait for")
	} else if !strings.Contains(logs, readyLine[1]) {
		t.Errorf("README.md says to wait for the log line %q, which the agent never logged", readyLine[1])
	}
	for _, want := range []string{"berth agent stopped", "dev hosts stopped"} {
		if !strings.Contains(logs, want) {
			t.Errorf("after Ctrl-C the log lacks %q", want)
		}
	}
	if first := firstAgentLine(logs); !strings.Contains(first, home) {
		t.Errorf("the agent's first log line should name its database file, in the fresh home %s:\n%s", home, first)
	}
}

// runSteps runs commands in order and returns the output of each of steps (a command's
// words after bin/berth), failing when the commands lack one.
func runSteps(t *testing.T, root string, env, commands, steps []string) map[string]string {
	t.Helper()
	outputs := map[string]string{}
	for _, c := range commands {
		out := runClientCommand(t, root, env, c)
		for _, step := range steps {
			if strings.Contains(c, " "+step+" ") || strings.HasSuffix(c, " "+step) {
				outputs[step] += out
			}
		}
	}
	for _, step := range steps {
		if _, ok := outputs[step]; !ok {
			t.Errorf("the README's quick start has no `berth %s` command; it should show it", step)
		}
	}
	return outputs
}

// shellBlock returns the body of the ```sh block that starts on the line after marker; the
// marker must occur exactly once.
func shellBlock(t *testing.T, readme, marker string) string {
	t.Helper()
	if n := strings.Count(readme, marker); n != 1 {
		t.Fatalf("README.md has %d %s markers, want exactly one, on the line before its ```sh block", n, marker)
	}
	rest := strings.TrimLeft(readme[strings.Index(readme, marker)+len(marker):], " \t")
	rest, ok := strings.CutPrefix(rest, "\n```sh\n")
	if !ok {
		t.Fatalf("README.md: the line after %s must open a ```sh block", marker)
	}
	body, _, ok := strings.Cut(rest, "\n```")
	if !ok {
		t.Fatalf("README.md: the ```sh block after %s is not closed", marker)
	}
	if strings.TrimSpace(body) == "" {
		t.Fatalf("README.md: the ```sh block after %s is empty", marker)
	}
	return body + "\n"
}

// shellCommands splits a block into commands: one a line, backslash continuations joined,
// blank lines and comments left out.
func shellCommands(block string) []string {
	var cmds []string
	var cur strings.Builder
	for _, line := range strings.Split(block, "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if more, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur.WriteString(more + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmds = append(cmds, cur.String())
		cur.Reset()
	}
	return cmds
}

// quickstartEnv is a newcomer's environment: the caller's, with HOME and the XDG directories
// in home and no Berth or make variables, but the Go caches and go env file the caller has.
func quickstartEnv(t *testing.T, home, agentAddr string) []string {
	t.Helper()
	goEnv, err := exec.Command("go", "env", "GOCACHE", "GOMODCACHE", "GOPATH", "GOENV").Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	goVals := strings.Split(strings.TrimSpace(string(goEnv)), "\n")
	if len(goVals) != 4 {
		t.Fatalf("go env printed %q", goEnv)
	}
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "BERTH_"), strings.HasPrefix(name, "XDG_"), name == "HOME",
			name == "MAKEFLAGS", name == "MFLAGS", name == "MAKELEVEL", name == "MAKEOVERRIDES", name == "RUN_ARGS":
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"HOME="+home,
		"XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"XDG_DATA_HOME="+filepath.Join(home, ".local", "share"),
		"XDG_STATE_HOME="+filepath.Join(home, ".local", "state"),
		"XDG_CACHE_HOME="+filepath.Join(home, ".cache"),
		"GOCACHE="+goVals[0], "GOMODCACHE="+goVals[1], "GOPATH="+goVals[2], "GOENV="+goVals[3],
		"RUN_ARGS=--http-addr "+agentAddr,
		"BERTH_DEV_HOSTS_BASE_PORT=0",
	)
}

func envValue(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v
		}
	}
	return ""
}

// freeAddr returns a loopback address nothing listens on right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// agentBlock is the running agent block: make, run-local.sh, dev-hosts and the agent, all in
// one process group.
type agentBlock struct {
	cmd    *exec.Cmd
	logs   *syncBuffer
	exited chan struct{}
	err    error // set before exited closes
}

func startAgentBlock(t *testing.T, root string, env []string, block string) *agentBlock {
	t.Helper()
	cmd := exec.Command("bash", "-c", block)
	cmd.Dir = root
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	a := &agentBlock{cmd: cmd, logs: &syncBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = a.logs, a.logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the README's agent block: %v", err)
	}
	go func() {
		a.err = cmd.Wait()
		close(a.exited)
	}()
	t.Cleanup(func() {
		// Whatever happened, leave nothing of the group running: Ctrl-C first, so that
		// run-local.sh cleans up after itself, then SIGKILL.
		pgid := cmd.Process.Pid
		select {
		case <-a.exited:
		default:
			_ = syscall.Kill(-pgid, syscall.SIGINT)
			select {
			case <-a.exited:
			case <-time.After(stopTimeout):
			}
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-a.exited
		if t.Failed() {
			t.Logf("output of the agent block (%s):\n%s", strings.TrimSpace(block), a.logs.String())
		}
	})
	return a
}

// waitReady polls the agent's /readyz until it answers 200.
func (a *agentBlock) waitReady(t *testing.T, addr string) {
	t.Helper()
	deadline := time.NewTimer(readyTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		select {
		case <-a.exited:
			t.Fatalf("the agent block exited before the agent was ready: %v", a.err)
		case <-deadline.C:
			t.Fatalf("the agent was not ready within %v", readyTimeout)
		case <-tick.C:
		}
		resp, err := client.Get("http://" + addr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
	}
}

// interrupt sends SIGINT to the whole process group, as Ctrl-C does, and waits for every
// process of the group to end.
func (a *agentBlock) interrupt(t *testing.T) {
	t.Helper()
	pgid := a.cmd.Process.Pid
	if err := syscall.Kill(-pgid, syscall.SIGINT); err != nil {
		t.Fatalf("interrupt the agent block: %v", err)
	}
	deadline := time.NewTimer(stopTimeout)
	defer deadline.Stop()
	select {
	case <-a.exited:
	case <-deadline.C:
		t.Fatalf("the agent block did not stop within %v of Ctrl-C", stopTimeout)
	}
	// make waits for its children, and run-local.sh for the agent and the hosts, so by now
	// nothing of the group may be left.
	if err := syscall.Kill(-pgid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("processes of the agent block are still running after it exited (kill -0: %v)", err)
	}
}

// runClientCommand runs one README command through bash in the repository root.
func runClientCommand(t *testing.T, root string, env []string, command string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", command)
	cmd.Dir = root
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("$ %s  (%v)\n%s", command, time.Since(start).Round(time.Millisecond), stdout.String())
	if err != nil {
		t.Fatalf("README command `%s` failed: %v\nstdout:\n%s\nstderr:\n%s", command, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// firstAgentLine is the agent's first log line: the first line after run-local.sh says it
// starts the agent that is not the dev hosts'.
func firstAgentLine(logs string) string {
	_, after, ok := strings.Cut(logs, "starting the agent")
	if !ok {
		return ""
	}
	for _, line := range strings.Split(after, "\n")[1:] {
		if line != "" && !strings.Contains(line, "component=dev-hosts") {
			return line
		}
	}
	return ""
}

// syncBuffer is a bytes.Buffer several processes' output goes to.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
