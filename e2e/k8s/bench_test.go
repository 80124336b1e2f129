//go:build k8s

package k8s_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/domain"
	"github.com/berth-dev/berth/environ"
	"github.com/berth-dev/berth/environ/kubernetes"
)

const benchRuntimes = 100

// smallDeployment is a runtime template asking for a tenth of a core and 64Mi, so that a
// hundred runtimes fit on the local cluster's nodes.
const smallDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Name }}
spec:
  replicas: 1
  strategy:
    type: Recreate
  selector:
    matchLabels:
      berth.dev/resource-id: {{ quote .ResourceID }}
  template:
    metadata:
      labels:
        berth.dev/resource-id: {{ quote .ResourceID }}
    spec:
      containers:
        - name: runtime
          image: {{ quote .Image }}
          resources:
            requests:
              cpu: 100m
              memory: 64Mi
          volumeMounts:
            - name: data
              mountPath: {{ quote .DataDir }}
      volumes:
        - name: data
          persistentVolumeClaim:
            claimName: {{ .Name }}
`

func benchSpec(b *testing.B, ns string) string {
	path := filepath.Join(b.TempDir(), "deployment.yaml")
	if err := os.WriteFile(path, []byte(smallDeployment), 0o644); err != nil {
		b.Fatal(err)
	}
	return kubeSpec(b, ns, fmt.Sprintf(`, "template_paths": {"deployment": %q}`, path))
}

// BenchmarkApplyThroughput reconciles 100 runtimes through the environ, 16 at a time, and
// reports the objects applied per second (five per runtime). Readiness is not waited for.
func BenchmarkApplyThroughput(b *testing.B) {
	cs := clientset(b)
	for b.Loop() {
		b.StopTimer()
		ns := namespace(b, cs)
		env, err := kubernetes.New(provisioner, json.RawMessage(benchSpec(b, ns)), environ.Deps{})
		if err != nil {
			b.Fatal(err)
		}
		var failed atomic.Int64
		b.StartTimer()
		start := time.Now()
		runConcurrently(benchRuntimes, 16, func(int) {
			r := &environ.Resource{ID: uuid.NewString(), Type: domain.ResourceTypeRuntime}
			if _, err := env.Reconcile(context.Background(), r, &environ.ResourceOptions{Args: map[string]any{"slots": 1}}); err != nil {
				failed.Add(1)
				b.Log(err)
			}
		})
		elapsed := time.Since(start)
		b.StopTimer()
		env.Close()
		if failed.Load() > 0 {
			b.Fatalf("%d reconciles failed", failed.Load())
		}
		objects := float64(benchRuntimes * 5)
		b.ReportMetric(objects/elapsed.Seconds(), "objects/s")
		b.ReportMetric(elapsed.Seconds(), "s/100-reconciles")
		fmt.Printf("apply throughput: %d runtimes, %.0f objects in %s: %.1f objects/s\n", benchRuntimes, objects, elapsed.Round(time.Millisecond), objects/elapsed.Seconds())
		b.StartTimer()
	}
}

// BenchmarkInsertToReady inserts 100 runtime rows at once and measures until the agent has
// every one ready (Deployments rolled out, volumes bound).
func BenchmarkInsertToReady(b *testing.B) {
	cs := clientset(b)
	for b.Loop() {
		b.StopTimer()
		ns := namespace(b, cs)
		e := newEnv(b, fmt.Sprintf(`{%q: {"type": "kubernetes", "spec": %s}}`, provisioner, benchSpec(b, ns)))
		e.startAgent("--concurrency", "32")
		b.StartTimer()
		start := time.Now()
		_, err := e.pool.Exec(context.Background(), `
			INSERT INTO resources (type, name, owner, args)
			SELECT 'runtime', 'bench-' || i, 'owner-' || (i % 7), '{"slots": 1}'::jsonb
			FROM generate_series(1, $1) AS i`, benchRuntimes)
		if err != nil {
			b.Fatal(err)
		}
		eventually(b, "all runtimes ready", 10*time.Minute, func() (bool, string) {
			return e.queryInt("SELECT count(*) FROM resources WHERE status = 'ready'") == benchRuntimes, e.statusCounts()
		})
		elapsed := time.Since(start)
		b.StopTimer()
		b.ReportMetric(elapsed.Seconds(), "s/100-ready")
		fmt.Printf("insert to ready: %d runtimes in %s (%.1f runtimes/s)\n", benchRuntimes, elapsed.Round(time.Millisecond), benchRuntimes/elapsed.Seconds())
		if errs := e.queryInt("SELECT count(*) FROM resources WHERE status = 'error'"); errs > 0 {
			b.Errorf("%d resources in error: %s", errs, strings.TrimSpace(e.statusCounts()))
		}
		b.StartTimer()
	}
}
