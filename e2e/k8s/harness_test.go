//go:build k8s

package k8s_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/berth-dev/berth/internal/pgtest"
)

// kubeconfigPath is the cluster's admin kubeconfig; a run without one fails.
func kubeconfigPath(t testing.TB) string {
	t.Helper()
	p := os.Getenv("BERTH_KUBECONFIG")
	if p == "" {
		t.Fatal("BERTH_KUBECONFIG is not set: start a cluster (scripts/k8s/up.sh prints its kubeconfig path) and set BERTH_KUBECONFIG to it")
	}
	return p
}

// clientset is an admin client of the test cluster.
func clientset(t testing.TB) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfigPath(t))
	if err != nil {
		t.Fatalf("load BERTH_KUBECONFIG: %v", err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// namespace creates a namespace of its own for the test and deletes it afterwards.
func namespace(t testing.TB, cs kubernetes.Interface) string {
	t.Helper()
	suffix := make([]byte, 4)
	if _, err := rand.Read(suffix); err != nil {
		t.Fatal(err)
	}
	name := "berth-e2e-" + hex.EncodeToString(suffix)
	ctx := context.Background()
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = cs.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// kubeSpec is the kubernetes provisioner spec of the tests; extra is spliced into the object.
func kubeSpec(t testing.TB, ns, extra string) string {
	spec := fmt.Sprintf(`{"host": "http://*.rt.test", "namespace": %q, "image": "rilldata/rill",
		"kubeconfig_path": %q, "timeout_seconds": 90, "data_dir": "/mnt/data"%s}`, ns, kubeconfigPath(t), extra)
	return spec
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func berthBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if p := os.Getenv("BERTH_BINARY"); p != "" {
			binPath = p
			return
		}
		dir, err := os.MkdirTemp("", "berth-e2e-k8s-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "berth")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/berth-dev/berth/cmd/agent").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("build berth: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// env is one test's database, provisioner set and agent processes.
type env struct {
	t      testing.TB
	bin    string
	dbURL  string
	setDir string
	pool   *pgxpool.Pool
}

func newEnv(t testing.TB, setJSON string) *env {
	t.Helper()
	e := &env{t: t, bin: berthBinary(t), dbURL: pgtest.New(t), setDir: t.TempDir()}
	if err := os.WriteFile(filepath.Join(e.setDir, "set.json"), []byte(setJSON), 0o600); err != nil {
		t.Fatal(err)
	}
	// Fails fast, with the agent's own words, when the binary cannot load the set (e.g. a
	// build without the kubernetes provisioner type).
	e.berth("check-config", "--provisioners", filepath.Join(e.setDir, "set.json"))
	e.berth("migrate")
	pool, err := pgxpool.New(context.Background(), e.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e.pool = pool
	return e
}

func (e *env) cmdEnv() []string {
	return append(os.Environ(), "BERTH_DATABASE_URL="+e.dbURL, "BERTH_PROVISIONER_SET_JSON=", "BERTH_DEFAULT_PROVISIONER=")
}

func (e *env) berth(args ...string) string {
	e.t.Helper()
	out, stderr, err := e.tryBerth(args...)
	if err != nil {
		e.t.Fatalf("berth %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, stderr)
	}
	return out
}

func (e *env) tryBerth(args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.bin, args...)
	cmd.Env = e.cmdEnv()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// agent is a running `berth run`.
type agent struct {
	cmd  *exec.Cmd
	logs *lockedWriter
	done chan error
}

func (e *env) startAgent(extra ...string) *agent {
	e.t.Helper()
	args := append([]string{"run",
		"--provisioners", filepath.Join(e.setDir, "set.json"),
		"--agent-id", "e2e-k8s-agent",
		"--poll-interval", "200ms",
		"--backoff-base", "200ms",
		"--backoff-max", "2s",
		"--capacity-retry", "1s",
		"--log-level", "debug",
	}, extra...)
	cmd := exec.Command(e.bin, args...)
	cmd.Env = e.cmdEnv()
	out := &lockedWriter{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	a := &agent{cmd: cmd, logs: out, done: make(chan error, 1)}
	go func() { a.done <- cmd.Wait() }()
	e.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-a.done
		a.done <- nil
		if e.t.Failed() {
			e.t.Log("agent log follows")
			for _, line := range strings.Split(out.String(), "\n") {
				e.t.Log("agent: " + line)
			}
		}
	})
	return a
}

type lockedWriter struct {
	mu sync.Mutex
	w  bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

func (a *agent) kill9(t testing.TB) {
	t.Helper()
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := <-a.done
	a.done <- err
}

func (a *agent) stop(t testing.TB) {
	t.Helper()
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-a.done:
		a.done <- err
		if err != nil {
			t.Fatalf("agent exited with %v after SIGTERM", err)
		}
	case <-time.After(45 * time.Second):
		t.Fatal("agent did not stop within 45s of SIGTERM")
	}
}

// resourceJSON is the CLI's -o json shape.
type resourceJSON struct {
	ID                 string         `json:"id"`
	Type               string         `json:"type"`
	Provisioner        string         `json:"provisioner"`
	Status             string         `json:"status"`
	StatusMessage      string         `json:"status_message"`
	Args               map[string]any `json:"args"`
	Config             map[string]any `json:"config"`
	Generation         int64          `json:"generation"`
	ObservedGeneration int64          `json:"observed_generation"`
}

func (e *env) get(id string) resourceJSON {
	e.t.Helper()
	var r resourceJSON
	out := e.berth("resource", "get", id, "-o", "json")
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		e.t.Fatalf("decode %q: %v", out, err)
	}
	return r
}

// create runs `berth resource create` and returns the id (the last line of stdout).
func (e *env) create(args ...string) string {
	e.t.Helper()
	out := strings.TrimSpace(e.berth(append([]string{"resource", "create"}, args...)...))
	lines := strings.Split(out, "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, what string, within time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	last := ""
	for time.Now().Before(deadline) {
		ok, detail := cond()
		if ok {
			return
		}
		last = detail
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s (last: %s)", what, within, last)
}

func (e *env) queryInt(sql string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		e.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func (e *env) statusCounts() string {
	rows, err := e.pool.Query(context.Background(), "SELECT status, count(*) FROM resources GROUP BY status ORDER BY status")
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			return err.Error()
		}
		parts = append(parts, fmt.Sprintf("%s=%d", s, n))
	}
	return strings.Join(parts, " ")
}
