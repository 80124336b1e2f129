package external

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/berth-dev/berth/environ"
)

// TestThePythonExampleMatchesTheOpenAPIDocument runs the conformance suite against the
// example broker in examples/brokers/python through a proxy that checks every call and
// answer against the protocol's OpenAPI document.
func TestThePythonExampleMatchesTheOpenAPIDocument(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is not on PATH (%v): this test runs the example broker in examples/brokers/python; install Python 3.11 or newer", err)
	}
	dir := t.TempDir()
	socket := filepath.Join(dir, "broker.sock")
	cmd := exec.Command(python, "../../examples/brokers/python/broker.py", "--root", filepath.Join(dir, "root"), "--socket", socket)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	eventually(t, "the example broker listens", func() bool {
		conn, err := net.Dial("unix", socket)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: "broker"})
	proxy.Transport = &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}
	v := newValidating(t, proxy)
	srv := httptest.NewServer(v)
	defer srv.Close()
	results, err := Verify(context.Background(), jsonRaw(t, map[string]any{"types": []string{"folder"}, "url": srv.URL}),
		VerifyConfig{Type: "folder", Args: map[string]any{"size_mb": 3}}, environ.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	expectAllPass(t, results, "hibernate-and-wake")
	v.check()
}
