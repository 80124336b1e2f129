package kubernetes

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
)

// redisExample is the examples/types/redis type definition, with its template paths made
// relative to this package's directory.
func redisExample(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile("../../examples/types/redis/provisioners.json")
	if err != nil {
		t.Fatal(err)
	}
	var set map[string]struct {
		Spec struct {
			Types map[string]map[string]any `json:"types"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &set); err != nil {
		t.Fatal(err)
	}
	def := set["k8s"].Spec.Types["redis"]
	paths := def["templates"].([]any)
	for i, p := range paths {
		paths[i] = filepath.Join("../..", p.(string))
	}
	return def
}

// specWithTypes is the test spec with types as its "types".
func specWithTypes(t *testing.T, types map[string]any) string {
	t.Helper()
	js, err := json.Marshal(types)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSuffix(testSpec, "}") + `, "types": ` + string(js) + `}`
}

func redisResource(id string) *environ.Resource {
	return &environ.Resource{ID: id, Type: "redis"}
}

// The example redis type, defined in the spec alone: served next to the built-in types,
// rendered from its templates with the schema's defaults, labelled as Berth labels every
// object, reporting the config its definition templates (no secret, only the Secret's
// name), resized by a change of its args, hibernated to zero replicas and woken again.
func TestDefinedTypeRedisThroughItsLife(t *testing.T) {
	e, cs := newTestEnviron(t, specWithTypes(t, map[string]any{"redis": redisExample(t)}))
	if !e.Supports("redis") || !e.Supports(domain.ResourceTypeRuntime) {
		t.Fatalf("Supports(redis), Supports(runtime) = %v, %v", e.Supports("redis"), e.Supports(domain.ResourceTypeRuntime))
	}
	if got, want := e.Summary(), "namespace ns; serves runtime, clickhouse and redis"; got != want {
		t.Errorf("Summary = %q, want %q", got, want)
	}
	name := "redis-" + testPID
	res := reconcile(t, e, redisResource(testID), nil)
	d, err := cs.AppsV1().Deployments("ns").Get(t.Context(), name, metaGet)
	if err != nil {
		t.Fatal(err)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != "redis:7.2" || c.Resources.Requests.Memory().String() != "256Mi" || strings.Join(c.Args, " ") != "--maxmemory 256mb --maxmemory-policy allkeys-lru --save " {
		t.Errorf("deployment with default args: image %s, memory %s, args %q", c.Image, c.Resources.Requests.Memory(), c.Args)
	}
	if got := d.Labels[LabelResourceType]; got != "redis" {
		t.Errorf("deployment labelled type %q, want redis", got)
	}
	if _, err := cs.CoreV1().Services("ns").Get(t.Context(), name, metaGet); err != nil {
		t.Errorf("service: %v", err)
	}
	wantConfig := map[string]any{
		"host": name + ".ns.svc", "port": "6379", "url": "redis://" + name + ".ns.svc:6379/0",
		"password_secret_name": "", "password_secret_key": "",
	}
	if !equalJSON(res.Config, wantConfig) {
		t.Errorf("config %v, want %v", res.Config, wantConfig)
	}

	// Resized, with a password from a Secret the args name: the Deployment follows, the
	// config names the Secret and holds no password.
	args := map[string]any{"memory_mb": 512, "password_secret": map[string]any{"name": "redis-auth", "key": "password"}}
	res = reconcile(t, e, redisResource(testID), args)
	d, err = cs.AppsV1().Deployments("ns").Get(t.Context(), name, metaGet)
	if err != nil {
		t.Fatal(err)
	}
	c = d.Spec.Template.Spec.Containers[0]
	if c.Resources.Requests.Memory().String() != "512Mi" || len(c.Env) != 1 || c.Env[0].ValueFrom.SecretKeyRef.Name != "redis-auth" {
		t.Errorf("resized deployment: memory %s, env %+v", c.Resources.Requests.Memory(), c.Env)
	}
	if res.Config["password_secret_name"] != "redis-auth" || res.Config["password_secret_key"] != "password" {
		t.Errorf("config %v does not name the password's Secret", res.Config)
	}

	setDeploymentAvailable(t, cs, name)
	if err := e.AwaitReady(t.Context(), redisResource(testID)); err != nil {
		t.Fatalf("AwaitReady: %v", err)
	}
	asleep := hibernateDeployment(t, e, cs, redisResource(testID), &environ.ResourceOptions{Args: args}, name)
	if !hibernated(asleep.State) {
		t.Errorf("hibernated state %v", asleep.State)
	}
	if d, _ := cs.AppsV1().Deployments("ns").Get(t.Context(), name, metaGet); d.Spec.Replicas == nil || *d.Spec.Replicas != 0 {
		t.Errorf("hibernated deployment replicas %v, want 0", d.Spec.Replicas)
	}
	reconcile(t, e, redisResource(testID), args)
	if d, _ := cs.AppsV1().Deployments("ns").Get(t.Context(), name, metaGet); d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		t.Errorf("woken deployment replicas %v, want 1", d.Spec.Replicas)
	}
	if err := e.Deprovision(t.Context(), redisResource(testID)); err != nil {
		t.Fatalf("Deprovision: %v", err)
	}
	if left := objectsOf(t, e, testID); len(left) != 0 {
		t.Errorf("left after Deprovision: %v", left)
	}
}

// hibernateDeployment is hibernate for a Deployment named name.
func hibernateDeployment(t *testing.T, e *testEnv, cs *fake.Clientset, r *environ.Resource, opts *environ.ResourceOptions, name string) *environ.Resource {
	t.Helper()
	done := make(chan error, 1)
	var res *environ.Resource
	go func() {
		var err error
		res, err = e.Hibernate(t.Context(), r, opts)
		done <- err
	}()
	for {
		d, err := cs.AppsV1().Deployments("ns").Get(t.Context(), name, metaGet)
		if err == nil && d.Spec.Replicas != nil && *d.Spec.Replicas == 0 {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("Hibernate returned %v before scaling to zero", err)
		default:
		}
	}
	setDeploymentScaledDown(t, cs, name)
	if err := <-done; err != nil {
		t.Fatalf("Hibernate: %v", err)
	}
	return res
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// Args the schema refuses are a *domain.FieldError naming the arg (the JSON pointer into
// args as args.<field>) and saying how to fix it, from the catalog's definition as from
// Reconcile, which refuses them for good.
func TestDefinedTypeSchemaErrorsNameTheField(t *testing.T) {
	e, _ := newTestEnviron(t, specWithTypes(t, map[string]any{"redis": redisExample(t)}))
	def := e.DefinedTypes()[0]
	tests := []struct {
		args       map[string]any
		field, msg string
	}{
		{map[string]any{"memory_mb": 10}, "args.memory_mb", "minimum: got 10, want 64; memory_mb is the memory Redis may use for data, in MiB (64 to 65536)"},
		{map[string]any{"memory_mb": "lots"}, "args.memory_mb", "got string, want integer"},
		{map[string]any{"memry_mb": 512}, "args.memry_mb", "is not an arg of type redis: use one of memory_mb, password_secret, version"},
		{map[string]any{"password_secret": map[string]any{"name": "auth"}}, "args.password_secret.key", "is required"},
		{map[string]any{"version": "latest!"}, "args.version", "does not match pattern"},
	}
	for _, tc := range tests {
		err := def.Validate(tc.args)
		var fe *domain.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(fe.Msg, tc.msg) {
			t.Errorf("Validate(%v) = %v, want a field error on %s containing %q", tc.args, err, tc.field, tc.msg)
		}
		_, err = e.Reconcile(t.Context(), redisResource(testID), &environ.ResourceOptions{Args: tc.args})
		if !errors.As(err, &fe) || fe.Field != tc.field || !environ.IsPermanent(err) {
			t.Errorf("Reconcile(%v) = %v, want the permanent field error on %s", tc.args, err, tc.field)
		}
	}
	if err := def.Validate(map[string]any{"memory_mb": 1024, "version": "7.4"}); err != nil {
		t.Errorf("Validate of good args: %v", err)
	}
	if got := def.ArgsHelp(); !strings.Contains(got, "memory_mb (the memory Redis may use for data, in MiB (64 to 65536); default 256)") {
		t.Errorf("ArgsHelp = %q", got)
	}
}

// A bad type definition is refused when the configuration is loaded, with an error naming
// the field of the spec and the fix: a template of a kind Berth does not apply, a render
// without exactly one workload, a schema that is not a strict object schema or does not
// compile, example args the schema refuses, a built-in name, a probe on a port that is none.
func TestDefinedTypeRefusedAtLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	cronJob := write("cron.yaml", "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: {{ .Name }}\n")
	service := write("service.yaml", "apiVersion: v1\nkind: Service\nmetadata:\n  name: {{ .Name }}\n")
	probed := write("probed.yaml", strings.Replace(mustReadFile(t, "../../examples/types/redis/deployment.yaml"), "tcpSocket:", "httpGet:\n              path: /", 1))
	schema := map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{"memory_mb": map[string]any{"type": "integer"}}}
	tests := []struct {
		name   string
		change func(def map[string]any)
		want   string
	}{
		{"kind not allowed", func(d map[string]any) { d["templates"] = []any{cronJob} },
			`types.redis.templates.0: cron.yaml: document 1: batch/v1 "CronJob" is not a kind Berth manages; use one of`},
		{"no workload", func(d map[string]any) { d["templates"] = []any{service} },
			"types.redis.templates: must render exactly one Deployment or StatefulSet"},
		{"missing template file", func(d map[string]any) { d["templates"] = []any{filepath.Join(dir, "nope.yaml")} },
			"types.redis.templates.0: cannot read"},
		{"schema not strict", func(d map[string]any) { delete(d["args_schema"].(map[string]any), "additionalProperties") },
			"types.redis.args_schema.additionalProperties: must be false"},
		{"schema not an object", func(d map[string]any) { d["args_schema"] = map[string]any{"type": "string"} },
			`types.redis.args_schema.type: must be "object"`},
		{"schema does not compile", func(d map[string]any) {
			d["args_schema"] = map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{"x": map[string]any{"type": "strin"}}}
		}, "types.redis.args_schema:"},
		{"example args refused", func(d map[string]any) {
			d["args_schema"] = schema
			d["example_args"] = map[string]any{"memory_mb": "x"}
		}, "types.redis.example_args.memory_mb: got string, want integer"},
		{"required arg without an example", func(d map[string]any) {
			s := d["args_schema"].(map[string]any)
			s["required"] = []any{"memory_mb"}
			delete(s["properties"].(map[string]any)["memory_mb"].(map[string]any), "default")
		}, "types.redis.example_args.memory_mb: is required; memory_mb is the memory Redis may use for data, in MiB (64 to 65536): give example_args"},
		{"unknown key", func(d map[string]any) { d["readiness"] = true }, "types.redis.readiness: unknown field"},
		{"probe port", func(d map[string]any) { d["ready"] = map[string]any{"http": map[string]any{"path": "/", "port": 0}} },
			"types.redis.ready.http.port: must be a port number from 1 to 65535, got 0"},
		{"probe said twice", func(d map[string]any) {
			d["templates"] = []any{probed}
			d["ready"] = map[string]any{"http": map[string]any{"path": "/health", "port": 8080}}
		}, "types.redis.ready.http: container redis of Deployment redis-00000000000040008000000000000000 has a readinessProbe already"},
		{"config template", func(d map[string]any) { d["config"] = map[string]any{"host": "{{ .Nope }}"} },
			"types.redis.config.host: template: host:1:3: executing \"host\" at <.Nope>"},
		{"bad config key", func(d map[string]any) { d["config"] = map[string]any{"Host": "x"} }, "types.redis.config.Host: cannot be a config key"},
		{"secret suffix", func(d map[string]any) { d["generated_secret"] = map[string]any{"suffix": "Auth"} },
			`types.redis.generated_secret.suffix: "Auth" cannot end a Secret's name`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			def := redisExample(t)
			tc.change(def)
			_, err := New("k8s", json.RawMessage(specWithTypes(t, map[string]any{"redis": def})), environ.Deps{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	for name, want := range map[string]string{"runtime": "types.runtime: runtime is a built-in type", "Redis": `types.Redis: "Redis" cannot name a resource type`} {
		_, err := New("k8s", json.RawMessage(specWithTypes(t, map[string]any{name: redisExample(t)})), environ.Deps{})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New with type %s = %v, want %q", name, err, want)
		}
	}
}

func mustReadFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// ready.http puts an HTTP readiness probe on the workload's container: the cluster judges
// it, so the rollout Berth waits for includes it. units sizes the resource for quotas.
func TestDefinedTypeProbeAndUnits(t *testing.T) {
	def := redisExample(t)
	def["ready"] = map[string]any{"http": map[string]any{"path": "/healthz", "port": 8080}}
	def["units"] = "{{ .Args.memory_mb }}"
	def["args_schema"].(map[string]any)["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	def["templates"] = []any{writeTemp(t, strings.Replace(mustReadFile(t, "../../examples/types/redis/deployment.yaml"), "          readinessProbe:\n            tcpSocket:\n              port: redis\n", "", 1)), def["templates"].([]any)[1]}
	e, cs := newTestEnviron(t, specWithTypes(t, map[string]any{"redis": def}))
	reconcile(t, e, redisResource(testID), nil)
	d, err := cs.AppsV1().Deployments("ns").Get(t.Context(), "redis-"+testPID, metaGet)
	if err != nil {
		t.Fatal(err)
	}
	p := d.Spec.Template.Spec.Containers[0].ReadinessProbe
	if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" || p.HTTPGet.Port.IntValue() != 8080 {
		t.Errorf("readiness probe %+v, want GET /healthz on 8080", p)
	}
	for args, want := range map[string]int64{`{}`: 256, `{"memory_mb": 1024}`: 1024} {
		var a map[string]any
		_ = json.Unmarshal([]byte(args), &a)
		got, err := e.Units(redisResource(testID), &environ.ResourceOptions{Args: a})
		if err != nil || got != want {
			t.Errorf("Units(%s) = %d, %v; want %d", args, got, err, want)
		}
	}
}

func writeTemp(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "deployment.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A set built by the registry serves the types its kubernetes provisioners define: the
// set's catalog checks their args; two provisioners may define one type alike, not
// differently.
func TestDefinedTypesJoinTheSetsCatalog(t *testing.T) {
	registry := environ.NewRegistry()
	registry.Register(Type, New, Types...)
	def := redisExample(t)
	one := specWithTypes(t, map[string]any{"redis": def})
	set, err := registry.NewSet([]byte(`{"a": {"type": "kubernetes", "spec": `+one+`}, "b": {"type": "kubernetes", "spec": `+one+`}}`), "a", environ.Deps{})
	if err != nil {
		t.Fatalf("NewSet: %v", err)
	}
	defer set.Close()
	if got := set.Catalog.Names(); got != "runtime, clickhouse, redis" {
		t.Errorf("set serves %q", got)
	}
	if _, err := registry.Catalog().Lookup("redis"); err == nil {
		t.Error("the registry's own catalog learnt a type of one set")
	}
	var fe *domain.FieldError
	if err := set.Catalog.ValidateArgs("redis", map[string]any{"memory_mb": 1}); !errors.As(err, &fe) || fe.Field != "args.memory_mb" {
		t.Errorf("ValidateArgs = %v, want a field error on args.memory_mb", err)
	}
	if got := set.ServedTypes(set.Environs["b"]); len(got) != 3 {
		t.Errorf("b serves %v", got)
	}

	other := redisExample(t)
	other["hibernates"] = false
	two := specWithTypes(t, map[string]any{"redis": other})
	_, err = registry.NewSet([]byte(`{"a": {"type": "kubernetes", "spec": `+one+`}, "b": {"type": "kubernetes", "spec": `+two+`}}`), "a", environ.Deps{})
	if err == nil || !strings.Contains(err.Error(), `provisioner "b" (kubernetes), line 1, column`) || !strings.Contains(err.Error(), `resource type "redis" is defined twice, differently`) {
		t.Errorf("NewSet with two redis definitions = %v", err)
	}
}

// generated_secret gives each resource a password Berth generates once and keeps in a
// Secret of its own, labelled as the resource's objects: the templates mount it by name, the
// config names it, and the password is nowhere else; a second reconcile keeps it.
func TestDefinedTypeGeneratedSecret(t *testing.T) {
	def := redisExample(t)
	def["generated_secret"] = map[string]any{}
	def["config"] = map[string]any{"password_secret_name": "{{ .SecretName }}", "password_secret_key": "{{ .PasswordKey }}"}
	withPassword := strings.Replace(mustReadFile(t, "../../examples/types/redis/deployment.yaml"), "          securityContext:\n            allowPrivilegeEscalation",
		"          env:\n            - name: REDIS_PASSWORD\n              valueFrom:\n                secretKeyRef:\n                  name: {{ .SecretName }}\n                  key: {{ .PasswordKey }}\n          securityContext:\n            allowPrivilegeEscalation", 1)
	def["templates"] = []any{writeTemp(t, withPassword), def["templates"].([]any)[1]}
	e, cs := newTestEnviron(t, specWithTypes(t, map[string]any{"redis": def}))
	name := "redis-" + testPID
	res := reconcile(t, e, redisResource(testID), nil)
	secret, err := cs.CoreV1().Secrets("ns").Get(t.Context(), name+"-auth", metaGet)
	if err != nil {
		t.Fatal(err)
	}
	password := string(secret.Data["password"])
	if len(password) != 2*passwordBytes || secret.Labels[LabelResourceType] != "redis" || secret.Labels[LabelResourceID] != testID {
		t.Errorf("secret: password of %d characters, labels %v", len(password), secret.Labels)
	}
	if !equalJSON(res.Config, map[string]any{"password_secret_key": "password", "password_secret_name": name + "-auth"}) {
		t.Errorf("config %v", res.Config)
	}
	d, err := cs.AppsV1().Deployments("ns").Get(t.Context(), name, metaGet)
	if err != nil {
		t.Fatal(err)
	}
	if d.Spec.Template.Annotations[AnnotationSecretChecksum] == "" || d.Spec.Template.Spec.Containers[0].Env[0].ValueFrom.SecretKeyRef.Name != name+"-auth" {
		t.Errorf("deployment: pod annotations %v, env %+v", d.Spec.Template.Annotations, d.Spec.Template.Spec.Containers[0].Env)
	}
	for _, v := range []any{res.Config, res.State} {
		if js, _ := json.Marshal(v); strings.Contains(string(js), password) {
			t.Errorf("the password is in %s", js)
		}
	}
	reconcile(t, e, redisResource(testID), map[string]any{"memory_mb": 512})
	if again, _ := cs.CoreV1().Secrets("ns").Get(t.Context(), name+"-auth", metaGet); string(again.Data["password"]) != password {
		t.Error("a second reconcile changed the password")
	}
}

// The built-in types, now embedded definitions, render what they rendered as Go entries:
// the checksums of their objects and their config are those of the release before (so an
// upgrade rolls no pod and rewrites no config). A deliberate change of a built-in template
// changes the checksums here too.
func TestBuiltinDefinitionsRenderAsBefore(t *testing.T) {
	e, _ := newTestEnviron(t, testSpec)
	rt := reconcile(t, e, runtimeResource(testID), map[string]any{"slots": 2, "version": "0.50.1"})
	ch := reconcile(t, e, &environ.Resource{ID: otherID, Type: domain.ResourceTypeClickHouse}, nil)
	for _, c := range []struct {
		name     string
		res      *environ.Resource
		checksum string
		config   string
	}{
		{"runtime", rt, "799ec38dbe3befcf4fd3ba7c28046e6a2c1e4867b4e3d8427d464a52bedae577",
			`{"audience":"http://node-0b6e4f6a1c2d4e5f8a9b0c1d2e3f4a5b.localhost","cpu":2,"host":"http://node-0b6e4f6a1c2d4e5f8a9b0c1d2e3f4a5b.localhost","memory_gb":8,"storage_bytes":85899345920}`},
		{"clickhouse", ch, "b72aae8b0636c87ff9409ae8f175fbdbcb13b8c918d0e8347b5d14fbd6c1554c",
			`{"dsn":"clickhouse://default@ch-11111111222243338444555555555555.ns.svc:9000/default","password_secret_key":"password","password_secret_name":"ch-11111111222243338444555555555555-auth","password_secret_namespace":"ns"}`},
	} {
		if got := c.res.State["checksum"]; got != c.checksum {
			t.Errorf("%s checksum %v, want %s", c.name, got, c.checksum)
		}
		if js, _ := json.Marshal(c.res.Config); string(js) != c.config {
			t.Errorf("%s config %s, want %s", c.name, js, c.config)
		}
	}
}

// The example set loads as written, from the repository's root (its template paths are
// relative to the agent's working directory).
func TestRedisExampleSetLoadsAsWritten(t *testing.T) {
	set, err := os.ReadFile("../../examples/types/redis/provisioners.json")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir("../..")
	registry := environ.NewRegistry()
	registry.Register(Type, New, Types...)
	s, err := registry.NewSet(set, "", environ.Deps{})
	if err != nil {
		t.Fatalf("the example set: %v", err)
	}
	defer s.Close()
	if !s.Environs["k8s"].Supports("redis") {
		t.Error("the example's provisioner does not serve redis")
	}
}
