package kubernetes

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// seedExample is the kubernetes provisioner of the provisioner set documentation, comments
// removed.
const seedExample = `{
  "timeout_seconds": 30,
  "data_dir": "/mnt/data",
  "host": "http://node-*.localhost",
  "namespace": "cloud-runtime",
  "image": "rilldata/rill",
  "kubeconfig_path": "kubeconfig.yaml",
  "template_paths":
    {
      "http_ingress": "templates/http_ingress.yaml",
      "grpc_ingress": "templates/grpc_ingress.yaml",
      "service": "templates/service.yaml",
      "deployment": "templates/deployment.yaml",
      "pvc": "templates/pvc.yaml"
    }
}`

// seedWithoutTemplates is the seed example without template_paths, whose files do not exist
// here: the built-in templates stand in.
const seedWithoutTemplates = `{
  "timeout_seconds": 30,
  "data_dir": "/mnt/data",
  "host": "http://node-*.localhost",
  "namespace": "cloud-runtime",
  "image": "rilldata/rill",
  "kubeconfig_path": "kubeconfig.yaml"
}`

func TestParseSpecSeedExample(t *testing.T) {
	spec, err := ParseSpec(json.RawMessage(seedExample))
	if err != nil {
		t.Fatalf("ParseSpec(seed example): %v", err)
	}
	if spec.TimeoutSeconds != 30 || spec.DataDir != "/mnt/data" || spec.Host != "http://node-*.localhost" ||
		spec.Namespace != "cloud-runtime" || spec.Image != "rilldata/rill" || spec.KubeconfigPath != "kubeconfig.yaml" {
		t.Errorf("ParseSpec(seed example) = %+v", spec)
	}
	if len(spec.TemplatePaths) != 5 || spec.TemplatePaths["deployment"] != "templates/deployment.yaml" {
		t.Errorf("template paths = %v", spec.TemplatePaths)
	}
	if spec.CPUPerSlot != 1 || spec.MemoryGBPerSlot != 4 || spec.StorageBytesPerSlot != 40<<30 ||
		spec.QPS != 200 || spec.Burst != 400 || spec.ClickhouseImage != "clickhouse/clickhouse-server:24.8" || spec.SlotQuota != 0 {
		t.Errorf("defaults not filled in: %+v", spec)
	}
}

// The seed example names template files that do not exist here: New says which field.
func TestNewSeedExampleMissingTemplateFiles(t *testing.T) {
	t.Chdir(t.TempDir())
	_, err := New("kubernetes-example", json.RawMessage(seedExample), environ.Deps{})
	var fe *domain.FieldError
	if !errors.As(err, &fe) || fe.Field != "template_paths.pvc" || !strings.Contains(err.Error(), "cannot read templates/pvc.yaml") {
		t.Fatalf("New(seed example) = %v, want a template_paths.pvc error", err)
	}
}

// Without template_paths the seed example loads: the built-in templates are used and the
// cluster is not contacted (its kubeconfig does not even exist).
func TestNewSeedExampleBuiltinTemplates(t *testing.T) {
	t.Chdir(t.TempDir())
	env, err := New("kubernetes-example", json.RawMessage(seedWithoutTemplates), environ.Deps{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if env.Type() != Type || !env.Supports(domain.ResourceTypeRuntime) || !env.Supports(domain.ResourceTypeClickHouse) {
		t.Errorf("Type/Supports wrong")
	}
	if err := env.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestNewTemplateFilesRelativeToWorkingDirectory(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	builtin, err := builtinTemplates.ReadFile("templates/service.yaml")
	if err != nil {
		t.Fatal(err)
	}
	custom := strings.Replace(string(builtin), "name: {{ .Name }}", "name: {{ .Name }}-custom", 1)
	if err := os.MkdirAll(filepath.Join(dir, "templates"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "templates", "svc.yaml"), []byte(custom), 0o644); err != nil {
		t.Fatal(err)
	}
	e, cs := newTestEnviron(t, `{"host": "http://*.rt.example", "namespace": "ns", "image": "img",
		"template_paths": {"service": "templates/svc.yaml"}}`)
	reconcile(t, e, runtimeResource(testID), map[string]any{"slots": 1})
	if _, err := cs.CoreV1().Services("ns").Get(t.Context(), "rt-"+testPID+"-custom", metaGet); err != nil {
		t.Fatalf("custom service template not used: %v", err)
	}
}

func TestParseSpecErrors(t *testing.T) {
	base := `"host": "http://*.rt.example", "namespace": "ns", "image": "img"`
	tests := []struct {
		name, spec, field, want string
	}{
		{"missing", ``, "spec", "is missing"},
		{"not an object", `[1]`, "spec", "must be a JSON object"},
		{"unknown field", `{` + base + `, "replicas": 2}`, "replicas", "unknown field; known: timeout_seconds, data_dir"},
		{"unknown template key", `{` + base + `, "template_paths": {"ingress": "x.yaml"}}`, "template_paths.ingress", "unknown field; known: pvc, service"},
		{"template path not a string", `{` + base + `, "template_paths": {"pvc": 1}}`, "template_paths.pvc", "must be a string"},
		{"template paths not an object", `{` + base + `, "template_paths": ["x"]}`, "template_paths", "must be a JSON object"},
		{"host missing", `{"namespace": "ns", "image": "img"}`, "host", "is required"},
		{"host without wildcard", `{"host": "http://rt.example", "namespace": "ns", "image": "img"}`, "host", "has no '*'"},
		{"host not a URL", `{"host": "*.rt.example", "namespace": "ns", "image": "img"}`, "host", "not an absolute http(s) URL"},
		{"host with credentials", `{"host": "http://u:p@*.rt.example", "namespace": "ns", "image": "img"}`, "host", "must not carry credentials"},
		{"namespace missing", `{"host": "http://*.rt.example", "image": "img"}`, "namespace", "is required"},
		{"namespace invalid", `{"host": "http://*.rt.example", "namespace": "Cloud_Runtime", "image": "img"}`, "namespace", "is not a namespace name"},
		{"image missing", `{"host": "http://*.rt.example", "namespace": "ns"}`, "image", "is required"},
		{"data dir relative", `{` + base + `, "data_dir": "data"}`, "data_dir", "absolute path"},
		{"negative cpu", `{` + base + `, "cpu_per_slot": -1}`, "cpu_per_slot", "must not be negative"},
		{"fractional memory", `{` + base + `, "memory_gb_per_slot": 1.5}`, "memory_gb_per_slot", "must be a whole number"},
		{"qps not a number", `{` + base + `, "qps": "fast"}`, "qps", "must be a number"},
		{"negative qps", `{` + base + `, "qps": -1}`, "qps", "must not be negative"},
		{"negative slot quota", `{` + base + `, "slot_quota": -5}`, "slot_quota", "must not be negative"},
		{"timeout not a number", `{` + base + `, "timeout_seconds": "30s"}`, "timeout_seconds", "must be a whole number"},
		{"cpu past the bound", `{` + base + `, "cpu_per_slot": 9223372036854776}`, "cpu_per_slot", "must be at most 9223372036854775 (cores)"},
		{"memory past the bound", `{` + base + `, "memory_gb_per_slot": 8589934592}`, "memory_gb_per_slot", "must be at most 8589934591"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSpec(json.RawMessage(tc.spec))
			var fe *domain.FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("ParseSpec = %v, want a *domain.FieldError", err)
			}
			if fe.Field != tc.field || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseSpec = %q (field %q), want field %q and %q", err, fe.Field, tc.field, tc.want)
			}
		})
	}
}

func TestNewBrokenTemplates(t *testing.T) {
	deployment, err := builtinTemplates.ReadFile("templates/deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, key, text, want string
	}{
		{"parse error", "deployment", "kind: Deployment\nname: {{ .Name \n", "template_paths.deployment: template: deployment.yaml:3: unclosed action started at deployment.yaml:2"},
		{"unknown function", "deployment", "name: {{ shout .Name }}\n", "template_paths.deployment: template: deployment.yaml:1: function \"shout\" not defined"},
		{"unknown variable", "service", "apiVersion: v1\nkind: Service\nmetadata:\n  name: {{ .Nmae }}\n", "template_paths.service: template: service.yaml:4:"},
		{"invalid yaml", "pvc", "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: [name: {{ .Name }}\n", "template_paths.pvc: pvc.yaml: document 1 is not valid YAML"},
		{"not a mapping", "pvc", "- a\n- b\n", "template_paths.pvc: pvc.yaml: document 1 is not a YAML mapping"},
		{"unmanaged kind", "http_ingress", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {{ .Name }}\n", `template_paths.http_ingress: http_ingress.yaml: document 1: v1 "Pod" is not a kind Berth manages`},
		{"unknown object field", "deployment", strings.Replace(string(deployment), "replicas: 1", "replica: 1", 1), `template_paths.deployment: deployment.yaml: document 1 is not a valid Deployment: json: unknown field "replica"`},
		{"no name", "service", "apiVersion: v1\nkind: Service\nmetadata:\n  labels: {}\n", "metadata.name is required"},
		{"other namespace", "service", "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\n  namespace: kube-system\n", `metadata.namespace is "kube-system"`},
		{"no deployment", "deployment", "", "template_paths.deployment: must render exactly one Deployment, rendered 0"},
		{"duplicate names", "grpc_ingress", strings.Replace(mustRead(t, "http_ingress.yaml"), "-http", "-grpc", 1) + "---\n" + mustRead(t, "grpc_ingress.yaml"), "Ingress rt-00000000000040008000000000000000-grpc is also rendered by template_paths.grpc_ingress"},
		{"clickhouse without service", "clickhouse_service", "# none\n", "template_paths.clickhouse_service: must render a Service"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, tc.key+".yaml")
			if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			spec := `{"host": "http://*.rt.example", "namespace": "ns", "image": "img", "template_paths": {"` + tc.key + `": "` + path + `"}}`
			_, err := New("k8s", json.RawMessage(spec), environ.Deps{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestNewTemplateFilesMustBeSmallRegularFiles: a template path to a device, a pipe, a
// directory or a file over the limit is refused with the field and the fix, without reading it.
func TestNewTemplateFilesMustBeSmallRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge.yaml")
	if err := os.WriteFile(huge, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(huge, maxFileBytes+1); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"/dev/zero": "is not a regular file but a character device",
		fifo:        "is not a regular file but a named pipe",
		dir:         "is not a regular file but a directory",
		huge:        "is larger than 1 MiB",
	} {
		spec := `{"host": "http://*.rt.example", "namespace": "ns", "image": "img", "template_paths": {"pvc": "` + path + `"}}`
		_, err := New("k8s", json.RawMessage(spec), environ.Deps{})
		var fe *domain.FieldError
		if !errors.As(err, &fe) || fe.Field != "template_paths.pvc" || !strings.Contains(fe.Msg, "cannot read "+path+": "+want) || !strings.Contains(fe.Msg, "give the path of a template file") {
			t.Errorf("New with template_paths.pvc %s = %v, want a template_paths.pvc error saying %q", path, err, want)
		}
	}
	// A file of exactly the limit is read.
	exact := filepath.Join(dir, "pvc.yaml")
	text := mustRead(t, "pvc.yaml")
	if err := os.WriteFile(exact, []byte(text+"#"+strings.Repeat("x", maxFileBytes-len(text)-2)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New("k8s", json.RawMessage(`{"host": "http://*.rt.example", "namespace": "ns", "image": "img", "template_paths": {"pvc": "`+exact+`"}}`), environ.Deps{}); err != nil {
		t.Errorf("New with a template of %d bytes: %v", maxFileBytes, err)
	}
}

// TestHostErrorsHoldNoSecret: a runtime host URL with credentials, well formed or not, is
// refused without quoting them.
func TestHostErrorsHoldNoSecret(t *testing.T) {
	for host, secrets := range map[string][]string{
		"http://admin:Xq7/Zr#9@*.rt.example":  {"admin", "Xq7", "Zr"},
		"http://admin:S3cr3tPw@*.rt.example":  {"admin", "S3cr3tPw"},
		"http://admin:50%zzOff@*.rt.example":  {"admin", "zzOff"},
		"http://admin:two words@*.rt.example": {"admin", "words"},
		"admin:S3cr3tPw@*.rt.example":         {"S3cr3tPw"},
		"http://admin:S3cr3tPw@rt.example":    {"admin", "S3cr3tPw"},
		"node-*/admin:S3cr3tPw@rt.example":    {"admin", "S3cr3tPw"},
		"http://rt.example/a:S3cr3tPw@x":      {"S3cr3tPw"},
	} {
		js, _ := json.Marshal(host)
		_, err := ParseSpec(json.RawMessage(`{"host": ` + string(js) + `, "namespace": "ns", "image": "img"}`))
		var fe *domain.FieldError
		if !errors.As(err, &fe) || fe.Field != "host" {
			t.Errorf("ParseSpec with host %q = %v, want a host error", host, err)
			continue
		}
		for _, secret := range secrets {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("host error quotes %q: %v", secret, err)
			}
		}
	}
}

func mustRead(t *testing.T, name string) string {
	t.Helper()
	b, err := builtinTemplates.ReadFile("templates/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestImageWithTag(t *testing.T) {
	tests := []struct{ image, version, want string }{
		{"rilldata/rill", "", "rilldata/rill"},
		{"rilldata/rill:latest", "", "rilldata/rill:latest"},
		{"rilldata/rill", "0.50.1", "rilldata/rill:0.50.1"},
		{"rilldata/rill:latest", "v1", "rilldata/rill:v1"},
		{"registry.local:5000/rill", "v1", "registry.local:5000/rill:v1"},
		{"registry.local:5000/rill:old@sha256:abc", "v2", "registry.local:5000/rill:v2"},
	}
	for _, tc := range tests {
		if got, err := imageWithTag(tc.image, tc.version); err != nil || got != tc.want {
			t.Errorf("imageWithTag(%q, %q) = %q, %v; want %q", tc.image, tc.version, got, err, tc.want)
		}
	}
	var fe *domain.FieldError
	if _, err := imageWithTag("rill", "a b"); !errors.As(err, &fe) || fe.Field != "args.version" {
		t.Errorf("imageWithTag with a bad tag = %v, want an args.version error", err)
	}
}

func TestRestConfigRateLimitsAndSecrets(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: s3cr3t-token}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := ParseSpec(json.RawMessage(`{"host": "http://*.rt.example", "namespace": "ns", "image": "img", "kubeconfig_path": "` + kubeconfig + `"}`))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := restConfig(spec)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QPS != DefaultQPS || cfg.Burst != DefaultBurst || cfg.Host != "https://127.0.0.1:6443" {
		t.Errorf("rest config QPS=%v Burst=%d Host=%s, want %d, %d and the kubeconfig's server", cfg.QPS, cfg.Burst, cfg.Host, DefaultQPS, DefaultBurst)
	}
	spec.QPS, spec.Burst = 20, 40
	if cfg, err = restConfig(spec); err != nil || cfg.QPS != 20 || cfg.Burst != 40 {
		t.Errorf("rest config with qps 20, burst 40: %v %v %v", cfg.QPS, cfg.Burst, err)
	}

	// A broken kubeconfig holding a credential: the error must not quote it.
	if err := os.WriteFile(kubeconfig, []byte("users: [{name: u, user: {token: [s3cr3t-token}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = restConfig(spec)
	if err == nil || strings.Contains(err.Error(), "s3cr3t") || !strings.Contains(err.Error(), "kubeconfig_path") {
		t.Errorf("restConfig(broken kubeconfig) = %v, want a kubeconfig_path error without the token", err)
	}
	spec.KubeconfigPath = filepath.Join(dir, "missing")
	if _, err := restConfig(spec); err == nil || !strings.Contains(err.Error(), "kubeconfig_path: cannot read") {
		t.Errorf("restConfig(missing kubeconfig) = %v", err)
	}
}

func TestFingerprintFollowsTemplateText(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	builtin, err := builtinTemplates.ReadFile("templates/service.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("svc.yaml", builtin, 0o644); err != nil {
		t.Fatal(err)
	}
	registry := environ.NewRegistry()
	registry.Register(Type, New)
	fingerprint := func() string {
		t.Helper()
		set, err := registry.NewSet([]byte(`{"k8s": {"type": "kubernetes", "spec": {"host": "http://*.rt.example",
			"namespace": "ns", "image": "img", "template_paths": {"service": "svc.yaml"}}}}`), "k8s", environ.Deps{})
		if err != nil {
			t.Fatal(err)
		}
		defer set.Close()
		fp, err := set.Fingerprint("k8s")
		if err != nil {
			t.Fatal(err)
		}
		return fp
	}
	before := fingerprint()
	if again := fingerprint(); again != before {
		t.Fatalf("same spec and templates gave fingerprints %s and %s", before, again)
	}
	edited := strings.Replace(string(builtin), "name: {{ .Name }}", "name: {{ .Name }}-edited", 1)
	if err := os.WriteFile("svc.yaml", []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	if after := fingerprint(); after == before {
		t.Fatal("editing a template file left the provisioner's fingerprint unchanged: its resources would not be rolled onto the new template")
	}
}
