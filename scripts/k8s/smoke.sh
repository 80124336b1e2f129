#!/usr/bin/env bash
# smoke.sh: check that the local cluster started by up.sh runs workloads end to end.
#
#   scripts/k8s/smoke.sh    exit 0 when every check passes, non-zero with the reason otherwise
#
# In a fresh namespace it creates a PersistentVolumeClaim of the default StorageClass, a Deployment
# of 2 replicas whose pods mount it, and a Service selecting them; it waits until the Deployment has
# 2 available replicas, the claim is Bound and the Service has 2 ready endpoints. It then deletes
# the namespace and waits until the namespace and the provisioned volume are gone.
# BERTH_K8S_SMOKE_TIMEOUT (seconds, default 120) bounds each wait.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

timeout=${BERTH_K8S_SMOKE_TIMEOUT:-120}
ns="berth-smoke-$(date +%s)-$$"
started=$(date +%s)

[ -n "$(pid_of kube-apiserver)" ] || die "smoke: the cluster is not running; start it with scripts/k8s/up.sh"

fail() {
  log "smoke FAILED: $*"
  {
    echo "--- deployment status"
    kcurl GET "/apis/apps/v1/namespaces/$ns/deployments/web" | jq '.status' || true
    echo "--- pods"
    kcurl GET "/api/v1/namespaces/$ns/pods" | jq -r '.items[] | "\(.metadata.name) node=\(.spec.nodeName) phase=\(.status.phase)"' || true
    echo "--- claim"
    kcurl GET "/api/v1/namespaces/$ns/persistentvolumeclaims/data" | jq '.status' || true
    echo "--- events"
    kcurl GET "/api/v1/namespaces/$ns/events" | jq -r '.items[] | "\(.involvedObject.kind)/\(.involvedObject.name): \(.reason): \(.message)"' || true
  } >&2
  log "component logs are in $logs"
  exit 1
}

# await WHAT COMMAND...: retry COMMAND until it succeeds, or fail the smoke check.
await() {
  local what=$1 deadline
  shift
  deadline=$(( $(date +%s) + timeout ))
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || fail "no $what within ${timeout}s"
    sleep 0.5
  done
  log "smoke: $what after $(( $(date +%s) - started ))s"
}

create() {
  kapply "$1" "$2" || fail "could not create an object at $1"
}

deployment_available() {
  kcurl GET "/apis/apps/v1/namespaces/$ns/deployments/web" | jq -e '.status.availableReplicas == 2'
}
claim_bound() {
  kcurl GET "/api/v1/namespaces/$ns/persistentvolumeclaims/data" | jq -e '.status.phase == "Bound"'
}
endpoints_ready() {
  kcurl GET "/apis/discovery.k8s.io/v1/namespaces/$ns/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dweb" |
    jq -e '[.items[].endpoints[]? | select(.conditions.ready)] | length == 2'
}
# gone PATH: the API server answers NotFound for PATH (an unreachable server is not "gone").
gone() {
  local out
  out=$(kcurl GET "$1" 2>&1) && return 1
  grep -Eq '"reason": *"NotFound"' <<<"$out"
}

create /api/v1/namespaces "{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"$ns\"}}"
await "default service account" kcurl GET "/api/v1/namespaces/$ns/serviceaccounts/default"

create "/api/v1/namespaces/$ns/persistentvolumeclaims" '{
  "apiVersion": "v1", "kind": "PersistentVolumeClaim",
  "metadata": {"name": "data"},
  "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
}'
create "/apis/apps/v1/namespaces/$ns/deployments" '{
  "apiVersion": "apps/v1", "kind": "Deployment",
  "metadata": {"name": "web"},
  "spec": {
    "replicas": 2,
    "selector": {"matchLabels": {"app": "web"}},
    "template": {
      "metadata": {"labels": {"app": "web"}},
      "spec": {
        "containers": [{
          "name": "web", "image": "registry.invalid/web:1",
          "ports": [{"containerPort": 8080}],
          "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
          "volumeMounts": [{"name": "data", "mountPath": "/data"}]
        }],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]
      }
    }
  }
}'
create "/api/v1/namespaces/$ns/services" '{
  "apiVersion": "v1", "kind": "Service",
  "metadata": {"name": "web"},
  "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}
}'

await "claim Bound" claim_bound
await "2 available replicas" deployment_available
await "2 ready service endpoints" endpoints_ready
kcurl GET "/api/v1/namespaces/$ns/services/web" | jq -e '.spec.clusterIP | test("^10\\.96\\.")' >/dev/null ||
  fail "the service got no cluster IP from 10.96.0.0/16"
volume=$(kcurl GET "/api/v1/namespaces/$ns/persistentvolumeclaims/data" | jq -r '.spec.volumeName')

kcurl DELETE "/api/v1/namespaces/$ns" >/dev/null || fail "could not delete namespace $ns"
await "namespace deleted" gone "/api/v1/namespaces/$ns"
await "volume $volume reclaimed" gone "/api/v1/persistentvolumes/$volume"

log "smoke: ok in $(( $(date +%s) - started ))s"
echo "smoke: ok"
