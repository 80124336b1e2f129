package kubernetes

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ/internal/specjson"
)

// Defaults a spec gets when it leaves a field out (or sets it to 0).
const (
	// Per-slot sizing: the sizing of one slot of a Rill runtime.
	DefaultCPUPerSlot          = 1
	DefaultMemoryGBPerSlot     = 4
	DefaultStorageBytesPerSlot = int64(40) << 30 // 40 GiB

	DefaultTimeoutSeconds = 120
	// The client's rate limit is shared by every reconcile, health check and sweep of the
	// provisioner. One runtime's reconcile takes about a dozen requests: at 200/s the 16
	// concurrent reconciles an agent starts a backlog with (and keeps, when more do not raise
	// its throughput) do not wait on the limiter (at 50/s, applying took over
	// 3s per runtime when a hundred were created at once). The API server's priority and
	// fairness still protects the cluster.
	DefaultQPS             = 200
	DefaultBurst           = 400
	DefaultClickhouseImage = "clickhouse/clickhouse-server:24.8"
	DefaultDataDir         = "/mnt/data"
)

// Template keys of template_paths, in the order objects are applied.
const (
	TemplatePVC                   = "pvc"
	TemplateService               = "service"
	TemplateDeployment            = "deployment"
	TemplateHTTPIngress           = "http_ingress"
	TemplateGRPCIngress           = "grpc_ingress"
	TemplateClickhouseService     = "clickhouse_service"
	TemplateClickhouseStatefulSet = "clickhouse_statefulset"
)

// Spec is the JSON spec of a kubernetes provisioner.
type Spec struct {
	TimeoutSeconds int    `json:"timeout_seconds"` // how long AwaitReady waits for a rollout
	DataDir        string `json:"data_dir"`        // where the runtime keeps its data (the volume's mount path)
	Host           string `json:"host"`            // runtime URL; '*' becomes the provision id
	Namespace      string `json:"namespace"`
	Image          string `json:"image"`           // runtime image; args.version becomes its tag
	KubeconfigPath string `json:"kubeconfig_path"` // empty: the in-cluster config
	// TemplatePaths maps template keys to files; a key left out uses the built-in template.
	TemplatePaths map[string]string `json:"template_paths"`

	CPUPerSlot          int   `json:"cpu_per_slot"`
	MemoryGBPerSlot     int   `json:"memory_gb_per_slot"`
	StorageBytesPerSlot int64 `json:"storage_bytes_per_slot"`

	QPS             float64 `json:"qps"`   // client-side request rate limit
	Burst           int     `json:"burst"` // client-side request burst
	ClickhouseImage string  `json:"clickhouse_image"`
	// SlotQuota, when above 0, caps the slots of all runtimes of the provisioner and makes
	// capacity reports count slots instead of cluster CPU.
	SlotQuota int `json:"slot_quota"`
	// Budget, when set, is the API request rate every agent's instance of the provisioner
	// shares (QPS and Burst are each agent's own); nil: no shared budget. No resource is
	// built from it, so it is left out of the resources' fingerprint (ResourceSpec):
	// changing it reconciles nothing.
	Budget *BudgetSpec `json:"-"`
	// Types are the resource types the spec defines besides the built-in runtime and
	// clickhouse, by name (see TypeSpec and docs/types.md).
	Types map[string]*TypeSpec `json:"types,omitempty"`
}

// ParseSpec decodes raw strictly and validates it. Errors are *domain.FieldError naming the
// field and the fix. The returned spec has its defaults filled in. Template files are not
// read here; New reads and checks them.
func ParseSpec(raw json.RawMessage) (*Spec, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return nil, &domain.FieldError{Field: "spec", Msg: `is missing: give at least {"host": "https://*.runtime.example", "namespace": "NAMESPACE", "image": "IMAGE"}`}
	}
	var spec Spec
	var templates, budget, types json.RawMessage
	if err := specjson.DecodeObject("spec", "", trimmed, []specjson.Field{
		{Name: "timeout_seconds", Dst: &spec.TimeoutSeconds},
		{Name: "data_dir", Dst: &spec.DataDir},
		{Name: "host", Dst: &spec.Host},
		{Name: "namespace", Dst: &spec.Namespace},
		{Name: "image", Dst: &spec.Image},
		{Name: "kubeconfig_path", Dst: &spec.KubeconfigPath},
		{Name: "template_paths", Dst: &templates},
		{Name: "cpu_per_slot", Dst: &spec.CPUPerSlot},
		{Name: "memory_gb_per_slot", Dst: &spec.MemoryGBPerSlot},
		{Name: "storage_bytes_per_slot", Dst: &spec.StorageBytesPerSlot},
		{Name: "qps", Dst: &spec.QPS},
		{Name: "burst", Dst: &spec.Burst},
		{Name: "clickhouse_image", Dst: &spec.ClickhouseImage},
		{Name: "slot_quota", Dst: &spec.SlotQuota},
		{Name: "budget", Dst: &budget},
		{Name: "types", Dst: &types},
	}); err != nil {
		return nil, err
	}
	if types != nil && !bytes.Equal(bytes.TrimSpace(types), []byte("null")) {
		t, err := parseTypes(types)
		if err != nil {
			return nil, err
		}
		spec.Types = t
	}
	if budget != nil && !bytes.Equal(bytes.TrimSpace(budget), []byte("null")) {
		b, err := parseBudget(budget)
		if err != nil {
			return nil, err
		}
		spec.Budget = b
	}
	if templates != nil && !bytes.Equal(bytes.TrimSpace(templates), []byte("null")) {
		spec.TemplatePaths = make(map[string]string)
		fields := make([]specjson.Field, len(templateKeys))
		values := make([]string, len(templateKeys))
		for i, key := range templateKeys {
			fields[i] = specjson.Field{Name: key, Dst: &values[i]}
		}
		if err := specjson.DecodeObject("template_paths", "template_paths.", templates, fields); err != nil {
			return nil, err
		}
		for i, key := range templateKeys {
			if values[i] != "" {
				spec.TemplatePaths[key] = values[i]
			}
		}
	}
	if err := spec.validate(); err != nil {
		return nil, err
	}
	return &spec, nil
}

func (s *Spec) validate() error {
	if s.Host == "" {
		return &domain.FieldError{Field: "host", Msg: "is required: the runtimes' URL with a '*' for the provision id, e.g. https://*.runtime.example"}
	}
	if err := checkURL(strings.ReplaceAll(s.Host, "*", "x")); err != nil {
		return &domain.FieldError{Field: "host", Msg: err.Error()}
	}
	if !strings.Contains(s.Host, "*") {
		return &domain.FieldError{Field: "host", Msg: fmt.Sprintf("%s has no '*': put one where each runtime's provision id goes, e.g. https://*.runtime.example", quoteURL(s.Host))}
	}
	if s.Namespace == "" {
		return &domain.FieldError{Field: "namespace", Msg: "is required: the namespace Berth creates its objects in"}
	}
	if errs := validation.IsDNS1123Label(s.Namespace); len(errs) > 0 {
		return &domain.FieldError{Field: "namespace", Msg: fmt.Sprintf("%q is not a namespace name: %s", s.Namespace, strings.Join(errs, "; "))}
	}
	if strings.TrimSpace(s.Image) == "" {
		return &domain.FieldError{Field: "image", Msg: "is required: the runtime image, e.g. rilldata/rill"}
	}
	if s.DataDir == "" {
		s.DataDir = DefaultDataDir
	} else if !strings.HasPrefix(s.DataDir, "/") {
		return &domain.FieldError{Field: "data_dir", Msg: fmt.Sprintf("%q must be an absolute path (the volume's mount path in the runtime container)", s.DataDir)}
	}
	if s.ClickhouseImage == "" {
		s.ClickhouseImage = DefaultClickhouseImage
	}
	if s.QPS < 0 {
		return &domain.FieldError{Field: "qps", Msg: fmt.Sprintf("must not be negative, got %v; leave it out (or 0) for the default of %d", s.QPS, DefaultQPS)}
	}
	if s.QPS == 0 {
		s.QPS = DefaultQPS
	}
	if s.SlotQuota < 0 {
		return &domain.FieldError{Field: "slot_quota", Msg: fmt.Sprintf("must not be negative, got %d; leave it out (or 0) to count cluster CPU instead", s.SlotQuota)}
	}
	for _, n := range []struct {
		name string
		v    *int
		def  int
	}{
		{"timeout_seconds", &s.TimeoutSeconds, DefaultTimeoutSeconds},
		{"burst", &s.Burst, DefaultBurst},
		{"cpu_per_slot", &s.CPUPerSlot, DefaultCPUPerSlot},
		{"memory_gb_per_slot", &s.MemoryGBPerSlot, DefaultMemoryGBPerSlot},
	} {
		if err := sizing(n.name, n.v, n.def); err != nil {
			return err
		}
	}
	if err := sizing("storage_bytes_per_slot", &s.StorageBytesPerSlot, DefaultStorageBytesPerSlot); err != nil {
		return err
	}
	if int64(s.CPUPerSlot) > maxCPU {
		return &domain.FieldError{Field: "cpu_per_slot", Msg: fmt.Sprintf("must be at most %d (cores), got %d", int64(maxCPU), s.CPUPerSlot)}
	}
	if int64(s.MemoryGBPerSlot) > maxMemoryGB {
		return &domain.FieldError{Field: "memory_gb_per_slot", Msg: fmt.Sprintf("must be at most %d, got %d", int64(maxMemoryGB), s.MemoryGBPerSlot)}
	}
	return nil
}

// Bounds of a runtime's sizing (per slot times slots), so that every figure derived from it
// fits an int64: CPU in millicores (capacity counts millicpu), memory and storage in bytes
// (their quantities).
const (
	maxCPU          = math.MaxInt64 / 1000
	maxMemoryGB     = math.MaxInt64 >> 30
	maxStorageBytes = math.MaxInt64
)

// slotBound is how many slots a runtime may have, and the per-slot field that bounds it.
type slotBound struct {
	slots   int
	field   string
	perSlot int64
}

// maxSlots is the most slots a runtime may have before its CPU, memory or storage (per slot
// times slots) goes past maxCPU, maxMemoryGB or maxStorageBytes. The spec is validated: every
// per-slot figure is at least 1 and at most its bound.
func (s *Spec) maxSlots() slotBound {
	most := slotBound{slots: math.MaxInt}
	for _, b := range []struct {
		field        string
		perSlot, max int64
	}{
		{"cpu_per_slot", int64(s.CPUPerSlot), maxCPU},
		{"memory_gb_per_slot", int64(s.MemoryGBPerSlot), maxMemoryGB},
		{"storage_bytes_per_slot", s.StorageBytesPerSlot, maxStorageBytes},
	} {
		if n := b.max / b.perSlot; n < int64(most.slots) {
			most = slotBound{slots: int(n), field: b.field, perSlot: b.perSlot}
		}
	}
	return most
}

func sizing[T int | int64](name string, v *T, def T) error {
	switch {
	case *v < 0:
		return &domain.FieldError{Field: name, Msg: fmt.Sprintf("must not be negative, got %d; leave it out (or 0) for the default of %d", *v, def)}
	case *v == 0:
		*v = def
	}
	return nil
}

// checkURL checks that s is an absolute http(s) URL without credentials. Its errors quote s
// only when it parses without any: a URL that does not parse may hold them anywhere.
func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("is not a URL (not shown: it may hold credentials): write it as http://*.HOST or https://*.HOST")
	}
	if u.User != nil || strings.Contains(u.Opaque, "@") {
		return errors.New("must not carry credentials: give the URL without user:password@")
	}
	if u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return fmt.Errorf("%s is not an absolute http(s) URL: write it as http://*.HOST or https://*.HOST", quoteURL(s))
	}
	return nil
}

// quoteURL is how errors show a URL that parsed without credentials: quoted, unless an '@'
// left in it (in a path, say) may still be the end of a password.
func quoteURL(s string) string {
	if strings.Contains(s, "@") {
		return "the URL (not shown: it may hold credentials)"
	}
	return strconv.Quote(s)
}
