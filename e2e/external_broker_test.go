package e2e_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-dev/berth/internal/e2etest"
)

// pythonBroker returns the python3 interpreter and the example broker's path. CI machines
// have python3: a machine without it fails the test, saying so, rather than skipping it.
func pythonBroker(t *testing.T) (string, string) {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is not on PATH (%v): the external broker e2e tests run the example broker in examples/brokers/python; install Python 3.11 or newer", err)
	}
	broker, err := filepath.Abs(filepath.Join("..", "examples", "brokers", "python", "broker.py"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(broker); err != nil {
		t.Fatalf("the example broker: %v", err)
	}
	return python, broker
}

// TestExternalBrokerVerify runs the conformance suite against the example Python broker.
func TestExternalBrokerVerify(t *testing.T) {
	python, broker := pythonBroker(t)
	root := t.TempDir()
	cmd := exec.Command(e2etest.Binary(t), "broker", "verify", "--type", "folder", "--args", `{"size_mb": 2}`,
		"--command", python+" "+broker+" --root "+root)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("berth broker verify: %v\n%s", err, out)
	}
	text := string(out)
	for _, check := range []string{"reconcile-idempotent", "stale-lease-refused", "invalid-args-permanent", "cancellation", "deadline-passed-refused", "hibernate-and-wake", "deprovision-missing"} {
		if !strings.Contains(text, "PASS "+check) {
			t.Errorf("no PASS line for %s:\n%s", check, text)
		}
	}
	if strings.Contains(text, "FAIL") || !strings.Contains(text, "checks passed") {
		t.Errorf("verify output:\n%s", text)
	}
	entries, _ := os.ReadDir(root)
	for _, entry := range entries {
		if !strings.HasPrefix(entry.Name(), ".") {
			t.Errorf("verify left %s behind under the broker's root", entry.Name())
		}
	}
}

// TestExternalBrokerThroughTheAgent provisions folders through the agent and the example
// Python broker it starts: create, ready and delete; a broker killed with SIGKILL
// mid-reconcile, and one that hangs past the call's deadline, cost the resource a retry,
// never the agent, and it converges once the broker is back.
func TestExternalBrokerThroughTheAgent(t *testing.T) {
	python, broker := pythonBroker(t)
	root := t.TempDir()
	set := map[string]any{"folders": map[string]any{
		"type": "external",
		"spec": map[string]any{
			"types":                []string{"folder"},
			"hibernate":            true,
			"command":              []string{python, broker, "--root", root},
			"call_timeout_seconds": 2,
			"restart_min_seconds":  1,
			"restart_max_seconds":  2,
		},
		"breaker": map[string]any{"open_for": "1s", "max_open_for": "2s"},
	}}
	base := e2etest.New(t, set)
	e := &env{Env: base, t: t, dbURL: base.DatabaseURL, pool: base.Pool}
	a := e.startAgent()
	create := func(name string, args ...string) string {
		return e.Create(append([]string{"--provisioners", e.SetPath, "--type", "folder", "--name", name, "--owner", "team"}, args...)...)
	}

	// Create, ready: the folder exists with its size.
	first := create("first", "--arg", "size_mb=5", "--wait")
	r := e.WaitReady(first, 30*time.Second)
	path, _ := r.Config["path"].(string)
	if r.Provisioner != "folders" || path != filepath.Join(root, first) || r.Config["size_mb"] != float64(5) {
		t.Fatalf("first: %+v config %v", r, r.Config)
	}
	if size, err := os.ReadFile(filepath.Join(path, ".size_mb")); err != nil || string(size) != "5" {
		t.Fatalf("the folder of first: %q, %v", size, err)
	}

	// Hibernate moves the folder aside; wake brings it back.
	e.Berth("resource", "hibernate", first)
	e.WaitResource(first, "hibernated", 30*time.Second, func(r e2etest.Resource) bool { return r.Status == "hibernated" })
	if _, err := os.Stat(path + ".hibernated"); err != nil {
		t.Fatalf("the hibernated folder of first: %v", err)
	}
	e.Berth("resource", "wake", first)
	e.WaitReady(first, 30*time.Second)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the woken folder of first: %v", err)
	}

	// kill -9 of the broker mid-reconcile: the supervisor restarts it and the resource
	// converges.
	slow := filepath.Join(root, ".slow")
	writeFile(t, slow, "30")
	killed := brokerPID(t, root)
	second := create("second")
	e.WaitResource(second, "provisioning", 30*time.Second, func(r e2etest.Resource) bool { return r.Status == "provisioning" })
	time.Sleep(500 * time.Millisecond) // the reconcile call is in the broker
	if err := syscall.Kill(killed, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 the broker: %v", err)
	}
	if err := os.Remove(slow); err != nil {
		t.Fatal(err)
	}
	if r := e.WaitReady(second, 60*time.Second); r.Config["path"] != filepath.Join(root, second) {
		t.Errorf("second after the broker's restart: %+v config %v", r, r.Config)
	}
	restarted := brokerPID(t, root)
	if restarted == killed {
		t.Fatalf("the broker's pid is still %d after kill -9", killed)
	}
	// The engine report shows the broker process and its restart.
	addr := e.engineAddr(a)
	e.Eventually("the engine report shows the restarted broker", 20*time.Second, func() (bool, string) {
		process := brokerProcess(t, addr)
		return process["running"] == true && process["pid"] == float64(restarted) && process["restarts"] == float64(1), fmt.Sprint(process)
	})

	// A broker that hangs past the deadline: the call times out, the resource retries, and
	// converges once the broker answers again.
	hang := filepath.Join(root, ".hang")
	writeFile(t, hang, "")
	third := create("third")
	hung := e.WaitResource(third, "backing off after the hung call", 60*time.Second, func(r e2etest.Resource) bool {
		return strings.Contains(r.StatusMessage, "no answer before the call's deadline") || strings.Contains(r.StatusMessage, "BrokerUnavailable") || r.Reason == "BrokerUnavailable"
	})
	t.Logf("while the broker hangs: %s", hung)
	if err := os.Remove(hang); err != nil {
		t.Fatal(err)
	}
	e.WaitReady(third, 60*time.Second)

	// Delete: every folder is gone.
	for _, id := range []string{first, second, third} {
		e.Berth("resource", "delete", id, "--wait")
		if _, err := os.Stat(filepath.Join(root, id)); !os.IsNotExist(err) {
			t.Errorf("the folder of %s is still there after delete (%v)", id, err)
		}
	}

	// The agent stayed up throughout, and stops cleanly, its broker with it.
	pid := brokerPID(t, root)
	a.Stop(t)
	e.Eventually("the broker stops with the agent", 10*time.Second, func() (bool, string) {
		err := syscall.Kill(pid, 0)
		return err != nil, "broker pid " + strconv.Itoa(pid) + " still runs"
	})

	// An agent killed with SIGKILL leaves no broker behind.
	b := e.startAgent()
	fourth := create("fourth", "--wait")
	e.WaitReady(fourth, 30*time.Second)
	pid = brokerPID(t, root)
	b.Kill9(t)
	e.Eventually("the broker dies with its agent", 10*time.Second, func() (bool, string) {
		err := syscall.Kill(pid, 0)
		return err != nil, "broker pid " + strconv.Itoa(pid) + " outlived its agent"
	})
}

// brokerProcess is the broker process of provisioner folders in the agent's engine report.
func brokerProcess(t *testing.T, addr string) map[string]any {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/debug/engine")
	if err != nil {
		return map[string]any{"error": err.Error()}
	}
	defer resp.Body.Close()
	var report struct {
		Manifolds map[string]struct {
			Report json.RawMessage `json:"report"`
		} `json:"manifolds"`
	}
	var environs struct {
		Provisioners map[string]struct {
			Broker struct {
				Process map[string]any `json:"process"`
			} `json:"broker"`
		} `json:"provisioners"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&report); err != nil {
		return map[string]any{"error": err.Error()}
	}
	if err := json.Unmarshal(report.Manifolds["environs"].Report, &environs); err != nil {
		return map[string]any{"error": err.Error()}
	}
	return environs.Provisioners["folders"].Broker.Process
}

// brokerPID is the pid the example broker wrote under its root when it started.
func brokerPID(t *testing.T, root string) int {
	t.Helper()
	var pid int
	e2etest.Eventually(t, "the broker writes its pid", 20*time.Second, func() (bool, string) {
		data, err := os.ReadFile(filepath.Join(root, ".pid"))
		if err != nil {
			return false, err.Error()
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(data)))
		return err == nil && syscall.Kill(pid, 0) == nil, string(data)
	})
	return pid
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}
