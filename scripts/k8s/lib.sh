# shellcheck shell=bash disable=SC2034
# lib.sh: settings and helpers shared by the local Kubernetes scripts (sourced, not run).
#
# BERTH_K8S_DIR (default ${TMPDIR:-/tmp}/berth-k8s) holds the cluster state: certificates,
# kubeconfigs, etcd data, logs/ and run/ (PID files). Ports, all on 127.0.0.1:
#   BERTH_K8S_PORT            API server (default 56443)
#   BERTH_K8S_ETCD_PORT       etcd clients (default 52379)
#   BERTH_K8S_ETCD_PEER_PORT  etcd peers (default 52380)
#   BERTH_K8S_CM_PORT         controller-manager health (default 56257)
#   BERTH_K8S_SCHED_PORT      scheduler health (default 56259)

k8s_dir=${BERTH_K8S_DIR:-${TMPDIR:-/tmp}/berth-k8s}
k8s_port=${BERTH_K8S_PORT:-56443}
etcd_port=${BERTH_K8S_ETCD_PORT:-52379}
etcd_peer_port=${BERTH_K8S_ETCD_PEER_PORT:-52380}
cm_port=${BERTH_K8S_CM_PORT:-56257}
sched_port=${BERTH_K8S_SCHED_PORT:-56259}

pki="$k8s_dir/pki"
logs="$k8s_dir/logs"
run="$k8s_dir/run"
kubeconfig="$k8s_dir/kubeconfig"
api="https://127.0.0.1:${k8s_port}"

# Start order; down stops them in reverse.
components=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)

log() { echo "k8s: $*" >&2; }
die() { log "$*"; exit 1; }

# pid_of NAME: the PID of our running NAME process, or nothing. A PID file whose process is gone
# or now runs another program (PID reuse) does not count.
pid_of() {
  local f="$run/$1.pid" pid exe
  [ -f "$f" ] || return 0
  pid=$(cat "$f" 2>/dev/null || true)
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  exe=$(readlink "/proc/$pid/exe" 2>/dev/null || true)
  case "$exe" in
    */"$1" | */"$1 (deleted)") echo "$pid" ;;
  esac
}

# kcurl METHOD PATH [CURL ARGS...]: an admin request to the API server; prints the body,
# fails on an HTTP error status.
kcurl() {
  local method=$1 path=$2
  shift 2
  curl -sS --fail-with-body --max-time 30 --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
    -X "$method" -H 'Accept: application/json' "$@" "$api$path"
}

# kapply PATH JSON: create the object at collection PATH unless it already exists.
kapply() {
  local path=$1 body=$2 out
  if out=$(kcurl POST "$path" -H 'Content-Type: application/json' -d "$body" 2>&1); then
    return 0
  fi
  grep -Eq '"reason": *"AlreadyExists"' <<<"$out" && return 0
  log "creating an object at $path failed: $out"
  return 1
}
