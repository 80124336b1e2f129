package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/juju/clock/testclock"

	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/static"
)

// TestDevHostsAnswerTheStaticProbe checks the set the hosts describe parses as a static spec
// and that every host in it answers the probe the static environ sends.
func TestDevHostsAnswerTheStaticProbe(t *testing.T) {
	clk := testclock.NewClock(time.Now())
	hosts, err := startDevHosts(devHostsConfig{Count: 3, Slots: 4, Provisioner: "dev"}, discardLogger(), clk)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		hosts.Kill()
		if err := hosts.Wait(); err != nil {
			t.Errorf("dev hosts stopped with %v", err)
		}
	})

	setJSON, err := hosts.SetJSON()
	if err != nil {
		t.Fatal(err)
	}
	var set map[string]environ.Spec
	if err := json.Unmarshal(setJSON, &set); err != nil {
		t.Fatalf("set is not JSON: %v\n%s", err, setJSON)
	}
	if len(set) != 1 || set["dev"].Type != static.Type {
		t.Fatalf("set = %s, want one static provisioner dev", setJSON)
	}
	spec, err := static.ParseSpec(set["dev"].Spec)
	if err != nil {
		t.Fatalf("the set's spec does not parse: %v\n%s", err, setJSON)
	}
	if len(spec.Runtimes) != 3 {
		t.Fatalf("runtimes = %+v, want 3", spec.Runtimes)
	}
	seen := map[string]bool{}
	for i, rt := range spec.Runtimes {
		if rt.Slots != 4 || !strings.HasPrefix(rt.Host, "http://127.0.0.1:") || seen[rt.Host] || rt.Host != hosts.URLs()[i] {
			t.Errorf("runtimes[%d] = %+v (hosts %v)", i, rt, hosts.URLs())
		}
		seen[rt.Host] = true
		if code, body := get(t, rt.Host+spec.HealthPath); code != http.StatusOK || !strings.Contains(body, `"status":"ok"`) {
			t.Errorf("probe of %s: %d %q", rt.Host, code, body)
		}
	}

	// The info page says which host it is and counts the probes.
	clk.Advance(90 * time.Second)
	code, page := get(t, spec.Runtimes[0].Host+"/")
	if code != http.StatusOK || !strings.Contains(page, "berth dev host host-1") || !strings.Contains(page, "health probes answered: 1") || !strings.Contains(page, "Up 1m30s") {
		t.Errorf("info page: %d\n%s", code, page)
	}
	if code, _ := get(t, spec.Runtimes[0].Host+"/elsewhere"); code != http.StatusNotFound {
		t.Errorf("GET /elsewhere = %d, want 404", code)
	}
}

// TestDevHostsCommand runs the command as a user would: it writes the set, which berth
// check-config accepts, serves until its context ends and then stops every host.
func TestDevHostsCommand(t *testing.T) {
	clearEnv(t)
	file := filepath.Join(t.TempDir(), "dev-set.json")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := newWatchedWriter("dev hosts running")
	cmd := newRootCommandWith(&globalOptions{clock: testclock.NewClock(time.Now()), pollInterval: time.Second})
	cmd.SetArgs([]string{"dev-hosts", "--count", "2", "--slots", "6", "--provisioner", "local", "--write", file})
	var stdout bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetErr(logs)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	select {
	case <-logs.seen:
	case err := <-done:
		t.Fatalf("dev-hosts ended before it ran: %v\n%s", err, logs)
	case <-time.After(waitLimit):
		t.Fatalf("dev-hosts did not start within %v:\n%s", waitLimit, logs)
	}

	out, _, err := runBerth(testclock.NewClock(time.Now()), "check-config", "--provisioners", file)
	if err != nil || !regexpMatch(`(?m)^local\s+static\s+\*`, out) {
		t.Fatalf("check-config of the written set: %v\n%s", err, out)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var set map[string]environ.Spec
	if err := json.Unmarshal(data, &set); err != nil {
		t.Fatal(err)
	}
	spec, err := static.ParseSpec(set["local"].Spec)
	if err != nil || len(spec.Runtimes) != 2 || spec.Runtimes[0].Slots != 6 {
		t.Fatalf("written set %s: %+v, %v", data, spec, err)
	}
	for _, rt := range spec.Runtimes {
		if code, _ := get(t, rt.Host+static.DefaultHealthPath); code != http.StatusOK {
			t.Errorf("probe of %s = %d", rt.Host, code)
		}
	}
	if stdout.Len() != 0 {
		t.Errorf("with --write nothing goes to stdout, got %q", stdout.String())
	}
	for _, want := range []string{"dev host listening", "component=dev-hosts", spec.Runtimes[1].Host, "wrote the provisioner set", file} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("dev-hosts after its context ended: %v", err)
		}
	case <-time.After(waitLimit):
		t.Fatal("dev-hosts did not stop after its context ended")
	}
	for _, rt := range spec.Runtimes {
		if resp, err := http.Get(rt.Host + static.DefaultHealthPath); err == nil {
			resp.Body.Close()
			t.Errorf("%s still answers after dev-hosts stopped", rt.Host)
		}
	}
	if !strings.Contains(logs.String(), "dev hosts stopped") {
		t.Errorf("logs lack the stop:\n%s", logs)
	}
}

func TestDevHostsPrintTheSetWithoutWrite(t *testing.T) {
	clearEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logs := newWatchedWriter("dev hosts running")
	cmd := newRootCommandWith(&globalOptions{clock: testclock.NewClock(time.Now()), pollInterval: time.Second})
	cmd.SetArgs([]string{"dev-hosts", "--count", "1"})
	stdout := &lockedBuffer{}
	cmd.SetOut(stdout)
	cmd.SetErr(logs)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	select {
	case <-logs.seen:
	case err := <-done:
		t.Fatalf("dev-hosts ended before it ran: %v\n%s", err, logs)
	case <-time.After(waitLimit):
		t.Fatalf("dev-hosts did not start within %v:\n%s", waitLimit, logs)
	}
	var set map[string]environ.Spec
	if err := json.Unmarshal([]byte(stdout.String()), &set); err != nil {
		t.Fatalf("stdout is not the set: %v\n%s", err, stdout)
	}
	if spec, err := static.ParseSpec(set[defaultDevHostProvisioner].Spec); err != nil || len(spec.Runtimes) != 1 || spec.Runtimes[0].Slots != defaultDevHostSlots {
		t.Errorf("printed set %s: %+v, %v", stdout, spec, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestDevHostsBasePort(t *testing.T) {
	// A port that was free a moment ago.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	hosts, err := startDevHosts(devHostsConfig{Count: 1, BasePort: port, Slots: 1, Provisioner: "dev"}, discardLogger(), testclock.NewClock(time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := hosts.URLs(), "http://127.0.0.1:"+strconv.Itoa(port); len(got) != 1 || got[0] != want {
		t.Errorf("URLs = %v, want [%s]", got, want)
	}

	// Now the port is taken: a second set cannot start and says what to do.
	_, err = startDevHosts(devHostsConfig{Count: 1, BasePort: port, Slots: 1, Provisioner: "dev"}, discardLogger(), testclock.NewClock(time.Now()))
	if err == nil || !strings.Contains(err.Error(), "dev host 1 of 1 cannot listen on 127.0.0.1:"+strconv.Itoa(port)) || !strings.Contains(err.Error(), "--base-port") {
		t.Errorf("start on a taken port: %v", err)
	}
	hosts.Kill()
	if err := hosts.Wait(); err != nil {
		t.Fatal(err)
	}
}

func TestDevHostsBadFlags(t *testing.T) {
	clearEnv(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--count", "0"}, "--count: must be at least 1, got 0"},
		{[]string{"--count", "2", "--base-port", "65535"}, "--base-port: 65535 does not leave room for 2 hosts"},
		{[]string{"--base-port", "-1"}, "--base-port: must be 0 (a free port each) or a port number, got -1"},
		{[]string{"--slots", "0"}, "--slots: must be at least 1"},
		{[]string{"--slots", "1000001"}, "--slots: must be at most 1000000"},
		{[]string{"--provisioner", ""}, "--provisioner: must not be empty"},
		{[]string{"--write", filepath.Join(t.TempDir(), "missing", "set.json")}, "--write: "},
	} {
		_, _, err := runBerth(testclock.NewClock(time.Now()), append([]string{"dev-hosts"}, tt.args...)...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("dev-hosts %v: %v, want %q", tt.args, err, tt.want)
		}
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func discardLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// watchedWriter collects what is written to it and closes seen once it holds want.
type watchedWriter struct {
	lockedBuffer
	want string
	once sync.Once
	seen chan struct{}
}

func newWatchedWriter(want string) *watchedWriter {
	return &watchedWriter{want: want, seen: make(chan struct{})}
}

func (w *watchedWriter) Write(p []byte) (int, error) {
	n, err := w.lockedBuffer.Write(p)
	if strings.Contains(w.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestExampleSetIsTheDevHostsSet keeps examples/provisioners.json what make run's dev hosts
// (berth dev-hosts --base-port 9101) describe, so the agent can be run on it by hand.
func TestExampleSetIsTheDevHostsSet(t *testing.T) {
	example, err := os.ReadFile(filepath.Join("..", "..", "examples", "provisioners.json"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := devHostsSetJSON(defaultDevHostProvisioner,
		[]string{"http://127.0.0.1:9101", "http://127.0.0.1:9102", "http://127.0.0.1:9103"}, defaultDevHostSlots)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(example, want) {
		t.Errorf("examples/provisioners.json differs from the set of berth dev-hosts --base-port 9101; want:\n%s", want)
	}
}
