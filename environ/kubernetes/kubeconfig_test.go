package kubernetes

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"k8s.io/client-go/kubernetes"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// writeKubeconfig writes a kubeconfig of one context whose cluster has server and whose user
// has the fields of user (a token when nil), and returns its path. It is JSON, so that any
// byte of server survives.
func writeKubeconfig(t *testing.T, dir, server string, cluster, user map[string]any) string {
	t.Helper()
	if cluster == nil {
		cluster = map[string]any{}
	}
	cluster["server"] = server
	if user == nil {
		user = map[string]any{"token": "user-token-not-in-the-server-url"}
	}
	raw, err := json.Marshal(map[string]any{
		"apiVersion":      "v1",
		"kind":            "Config",
		"clusters":        []any{map[string]any{"name": "c", "cluster": cluster}},
		"users":           []any{map[string]any{"name": "u", "user": user}},
		"contexts":        []any{map[string]any{"name": "x", "context": map[string]any{"cluster": "c", "user": "u"}}},
		"current-context": "x",
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func kubeconfigSpec(path string) string {
	js, _ := json.Marshal(path)
	return `{"host": "http://*.rt.example", "namespace": "ns", "image": "img", "kubeconfig_path": ` + string(js) + `}`
}

// TestServerURLErrorsHoldNoSecret: a kubeconfig server URL with credentials or a token, well
// formed or not, is refused, and nothing of the credentials is in any error the environ
// returns for it or in its logs; what parses is named by scheme, host and port only.
func TestServerURLErrorsHoldNoSecret(t *testing.T) {
	tests := []struct {
		name, server string
		secrets      []string // none may appear
		shown        string   // what the error names, when the URL parses
	}{
		{"password with unescaped slash and hash", "https://admin:Xq7/Zr#9@api.example:6443", []string{"admin", "Xq7", "Zr", "#9"}, ""},
		{"password", "https://admin:S3cr3tPw@api.example:6443", []string{"admin", "S3cr3tPw"}, "https://api.example:6443"},
		{"password with bad escape", "https://admin:50%zzOff@api.example:6443", []string{"admin", "50%", "zzOff"}, ""},
		{"password with a space", "https://admin:two words@api.example:6443", []string{"admin", "two words", "words"}, ""},
		{"password with a tab", "https://admin:S3c\tr3t@api.example:6443", []string{"admin", "S3c", "r3t"}, ""},
		{"password and a bad port", "https://admin:S3cr3tPw@api.example:port", []string{"admin", "S3cr3tPw"}, ""},
		{"password and a bad path escape", "https://admin:S3cr3tPw@api.example:6443/%zz", []string{"admin", "S3cr3tPw"}, ""},
		{"password and a broken IPv6 host", "https://admin:S3cr3tPw@[::1", []string{"admin", "S3cr3tPw"}, ""},
		{"password without a scheme", "admin:S3cr3tPw@api.example:6443", []string{"admin", "S3cr3tPw"}, "https://api.example:6443"},
		{"token as user", "https://T0kenValue@api.example:6443", []string{"T0kenValue"}, "https://api.example:6443"},
		{"query token", "https://api.example:6443/?token=T0kenValue", []string{"T0kenValue", "token="}, "https://api.example:6443"},
		{"query token after a path", "https://api.example:6443/prefix?access_token=T0kenValue&x=1", []string{"T0kenValue", "access_token"}, "https://api.example:6443"},
		{"fragment", "https://api.example:6443#T0kenValue", []string{"T0kenValue"}, "https://api.example:6443"},
		{"path and query without a scheme", "api.example:6443/T0kenValue?token=T0kenValue", []string{"T0kenValue"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeKubeconfig(t, t.TempDir(), tc.server, nil, nil)
			var logs bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			e, err := newEnviron("k8s", json.RawMessage(kubeconfigSpec(path)), environ.Deps{Logger: logger}, nil, bytes.NewReader(make([]byte, 64)))
			if err != nil {
				t.Fatalf("newEnviron: %v", err)
			}
			defer e.Close()
			ctx := t.Context()
			errs := map[string]error{"Check": e.Check(ctx)}
			_, errs["Reconcile"] = e.Reconcile(ctx, runtimeResource(testID), &environ.ResourceOptions{Args: map[string]any{"slots": 1}})
			_, errs["CheckResource"] = e.CheckResource(ctx, runtimeResource(testID), &environ.ResourceOptions{})
			_, errs["Capacity"] = e.Capacity(ctx)
			errs["Deprovision"] = e.Deprovision(ctx, runtimeResource(testID))
			errs["AwaitReady"] = e.AwaitReady(ctx, runtimeResource(testID))
			for op, err := range errs {
				if err == nil || !strings.Contains(err.Error(), "kubeconfig_path: the server URL of cluster \"c\"") {
					t.Errorf("%s = %v, want the server URL refused", op, err)
					continue
				}
				for _, secret := range tc.secrets {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("%s error quotes %q: %v", op, secret, err)
					}
				}
				if tc.shown != "" && !strings.Contains(err.Error(), "("+tc.shown+")") {
					t.Errorf("%s error does not name %s: %v", op, tc.shown, err)
				}
			}
			for _, secret := range tc.secrets {
				if strings.Contains(logs.String(), secret) {
					t.Errorf("logs quote %q: %s", secret, logs.String())
				}
			}
		})
	}
}

func TestServerURLsAccepted(t *testing.T) {
	for _, server := range []string{"https://127.0.0.1:6443", "127.0.0.1:6443", "https://proxy.example/k8s/clusters/c-1", "http://localhost:8080/"} {
		path := writeKubeconfig(t, t.TempDir(), server, nil, nil)
		spec, err := ParseSpec(json.RawMessage(kubeconfigSpec(path)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := restConfig(spec); err != nil {
			t.Errorf("restConfig with server %s: %v", server, err)
		}
	}
}

// TestKubeconfigFilesMustBeSmallRegularFiles: the kubeconfig and the files its context names
// are refused, naming the field and the file, when they are not regular files or are over the
// limit, instead of the read hanging or filling memory.
func TestKubeconfigFilesMustBeSmallRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge")
	if err := os.WriteFile(huge, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, maxFileBytes+1); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, kubeconfig string
		want             []string
	}{
		{"device", "/dev/zero", []string{"kubeconfig_path: cannot read /dev/zero: is not a regular file but a character device", "give the path of a kubeconfig file"}},
		{"named pipe", fifo, []string{"kubeconfig_path: cannot read " + fifo + ": is not a regular file but a named pipe"}},
		{"directory", dir, []string{"kubeconfig_path: cannot read " + dir + ": is not a regular file but a directory"}},
		{"too large", huge, []string{"kubeconfig_path: cannot read " + huge + ": is larger than 1 MiB"}},
		{"token file a device", writeKubeconfig(t, t.TempDir(), "https://127.0.0.1:6443", nil, map[string]any{"tokenFile": "/dev/zero"}),
			[]string{"kubeconfig_path: the tokenFile file /dev/zero that", "is not a regular file but a character device: fix the path in the kubeconfig"}},
		{"certificate authority a pipe", writeKubeconfig(t, t.TempDir(), "https://127.0.0.1:6443", map[string]any{"certificate-authority": fifo}, nil),
			[]string{"kubeconfig_path: the certificate-authority file " + fifo, "is not a regular file but a named pipe"}},
		{"client key too large", writeKubeconfig(t, t.TempDir(), "https://127.0.0.1:6443", nil, map[string]any{"client-certificate": huge, "client-key": huge}),
			[]string{"kubeconfig_path: the client-certificate file " + huge, "is larger than 1 MiB"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := ParseSpec(json.RawMessage(kubeconfigSpec(tc.kubeconfig)))
			if err != nil {
				t.Fatal(err)
			}
			_, err = restConfig(spec)
			for _, want := range tc.want {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("restConfig = %v, want it to say %q", err, want)
				}
			}
		})
	}

	// New refuses a kubeconfig path that is there but is no kubeconfig; one that is not there
	// is left to the first use, since a configuration may be checked on another machine.
	for _, path := range []string{"/dev/zero", fifo, huge} {
		_, err := New("k8s", json.RawMessage(kubeconfigSpec(path)), environ.Deps{})
		var fe *domain.FieldError
		if !errors.As(err, &fe) || fe.Field != "kubeconfig_path" || !strings.Contains(fe.Msg, path) || !strings.Contains(fe.Msg, "give the path of a kubeconfig file") {
			t.Errorf("New with kubeconfig_path %s = %v, want a kubeconfig_path error", path, err)
		}
	}
	if _, err := New("k8s", json.RawMessage(kubeconfigSpec(filepath.Join(dir, "absent"))), environ.Deps{}); err != nil {
		t.Errorf("New with a kubeconfig_path not there yet = %v", err)
	}
}

// inClusterSpec is a spec without kubeconfig_path: the agent uses its pod's service account.
const inClusterSpec = `{"host": "http://*.rt.example", "namespace": "ns", "image": "img"}`

// mountServiceAccount lays out dir as Kubernetes mounts a service account into a pod (a
// projected volume: token, ca.crt and namespace are symlinks into ..data, a timestamped
// directory) and returns where the token and CA are.
func mountServiceAccount(t *testing.T, dir, token string, caPEM []byte) serviceAccount {
	t.Helper()
	data := filepath.Join(dir, "..2026_12_01_19_00_00.1234567890")
	files := map[string][]byte{"token": []byte(token), "ca.crt": caPEM, "namespace": []byte("berth")}
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(data, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Base(data), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for name := range files {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return serviceAccount{TokenFile: filepath.Join(dir, "token"), CAFile: filepath.Join(dir, "ca.crt")}
}

// TestInClusterConfig: without kubeconfig_path the environ's client is the pod's service
// account's: the API server from KUBERNETES_SERVICE_HOST and _PORT, verified with the
// mounted CA, and the token read from its file (so a rotated token is read again), never
// copied into the configuration. A client built from it talks to an API server that takes
// only that token.
func TestInClusterConfig(t *testing.T) {
	const token = "eyJhbGciOiJSUzI1NiJ9.pod-token-S3CRET"
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, `{"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "Unauthorized", "reason": "Unauthorized", "code": 401}`)
			return
		}
		io.WriteString(w, `{"major": "1", "minor": "31", "gitVersion": "v1.31.0"}`)
	}))
	defer srv.Close()
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	host, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", host)
	t.Setenv("KUBERNETES_SERVICE_PORT", port)
	spec, err := ParseSpec(json.RawMessage(inClusterSpec))
	if err != nil {
		t.Fatal(err)
	}

	sa := mountServiceAccount(t, t.TempDir(), token, caPEM)
	cfg, err := restConfigWith(spec, sa)
	if err != nil {
		t.Fatalf("restConfigWith: %v", err)
	}
	if want := "https://" + net.JoinHostPort(host, port); cfg.Host != want {
		t.Errorf("Host = %q, want %q", cfg.Host, want)
	}
	if cfg.BearerTokenFile != sa.TokenFile || cfg.BearerToken != "" {
		t.Errorf("BearerTokenFile = %q and BearerToken set: %v, want the token file %s only", cfg.BearerTokenFile, cfg.BearerToken != "", sa.TokenFile)
	}
	if cfg.TLSClientConfig.CAFile != sa.CAFile || cfg.TLSClientConfig.Insecure {
		t.Errorf("TLSClientConfig = %+v, want CAFile %s and verification", cfg.TLSClientConfig, sa.CAFile)
	}
	if cfg.QPS != DefaultQPS || cfg.Burst != DefaultBurst || cfg.UserAgent != "berth" {
		t.Errorf("QPS %v, Burst %d, UserAgent %q: want the spec's limits and berth", cfg.QPS, cfg.Burst, cfg.UserAgent)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	version, err := cs.Discovery().ServerVersion()
	if err != nil || version.GitVersion != "v1.31.0" {
		t.Fatalf("ServerVersion = %v, %v; want v1.31.0", version, err)
	}

	// Another account's token is refused by the server; the error does not quote it.
	other := mountServiceAccount(t, t.TempDir(), "other-token-S3CRET", caPEM)
	cfg, err = restConfigWith(spec, other)
	if err != nil {
		t.Fatal(err)
	}
	cs, err = kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Discovery().ServerVersion(); err == nil || strings.Contains(err.Error(), "S3CRET") {
		t.Errorf("ServerVersion with a refused token = %v, want an error without the token", err)
	}
}

// TestInClusterConfigErrors: without a pod around it (no API server in the environment, no
// mounted token or CA) the in-cluster configuration is refused with what is missing and
// the two ways to fix it, through the environ's operations too, and never with the token.
func TestInClusterConfigErrors(t *testing.T) {
	const token = "pod-token-S3CRET"
	dir := t.TempDir()
	sa := mountServiceAccount(t, dir, token, []byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"))
	absent := filepath.Join(t.TempDir(), "serviceaccount")
	const fix = "set kubeconfig_path to a kubeconfig file, or run the agent in a pod whose service account token is mounted (automountServiceAccountToken not false)"
	tests := []struct {
		name       string
		host, port string
		sa         serviceAccount
		want       string
	}{
		{"not in a pod", "", "", sa, "the agent is not running in a Kubernetes pod (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not both set): " + fix},
		{"no port", "10.96.0.1", "", sa, "the agent is not running in a Kubernetes pod"},
		{"no token", "10.96.0.1", "443", serviceAccount{TokenFile: filepath.Join(absent, "token"), CAFile: sa.CAFile},
			"its token file " + filepath.Join(absent, "token") + " is missing: " + fix},
		{"no CA", "10.96.0.1", "443", serviceAccount{TokenFile: sa.TokenFile, CAFile: filepath.Join(absent, "ca.crt")},
			"its CA certificate file " + filepath.Join(absent, "ca.crt") + " is missing: " + fix},
		{"token a directory", "10.96.0.1", "443", serviceAccount{TokenFile: dir, CAFile: sa.CAFile},
			"its token file " + dir + " is not a regular file but a directory: " + fix},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBERNETES_SERVICE_HOST", tc.host)
			t.Setenv("KUBERNETES_SERVICE_PORT", tc.port)
			spec, err := ParseSpec(json.RawMessage(inClusterSpec))
			if err != nil {
				t.Fatal(err)
			}
			_, err = restConfigWith(spec, tc.sa)
			want := "kubeconfig_path is empty, so the pod's own service account is used, but " + tc.want
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("restConfigWith = %v, want %q", err, want)
			} else if strings.Contains(err.Error(), token) {
				t.Errorf("the error quotes the token: %v", err)
			}
		})
	}

	// The environ reports it on first use, naming the provisioner.
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	e, err := newEnviron("k8s", json.RawMessage(inClusterSpec), environ.Deps{Logger: logger}, nil, bytes.NewReader(make([]byte, 64)))
	if err != nil {
		t.Fatalf("newEnviron: %v", err)
	}
	defer e.Close()
	err = e.Check(t.Context())
	if want := `provisioner "k8s": kubeconfig_path is empty, so the pod's own service account is used, but the agent is not running in a Kubernetes pod`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Check = %v, want %q", err, want)
	}
}
