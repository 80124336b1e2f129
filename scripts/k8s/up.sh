#!/usr/bin/env bash
# up.sh: start a local Kubernetes control plane (no containers) and print its admin kubeconfig path.
#
#   scripts/k8s/up.sh     build the binaries if needed, start what is not running, print the kubeconfig
#
# The cluster is real etcd + kube-apiserver + kube-controller-manager + kube-scheduler, with two fake
# nodes driven by kwok: scheduled pods become Running and Ready without any container runtime.
# PersistentVolumeClaims of the default StorageClass "standard" are provisioned by the controller
# manager's host-path provisioner (WaitForFirstConsumer, reclaim Delete, expansion allowed) under
# /tmp/hostpath_pv. A bound claim's requested size can grow; nothing resizes the host-path volume
# behind it.
# Everything listens on 127.0.0.1 and trusts a CA made for this cluster only: it is for tests and
# development, never production. See lib.sh for the state directory and the ports;
# BERTH_K8S_NODES (default 2) sets how many fake nodes there are.
#
# Re-running is safe: with everything up it only prints the kubeconfig path (the last line of stdout).
# Logs are in $BERTH_K8S_DIR/logs, PID files in $BERTH_K8S_DIR/run; scripts/k8s/down.sh stops it.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

nodes=${BERTH_K8S_NODES:-2}

need_tools() {
  local missing=() t
  for t in curl openssl jq flock setsid; do
    command -v "$t" >/dev/null 2>&1 || missing+=("$t")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  [ "$(id -u)" = 0 ] || die "missing tools: ${missing[*]}; install them (Debian: apt-get install curl openssl jq util-linux)"
  log "installing curl openssl jq util-linux"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq curl openssl jq util-linux >&2
}

# cert NAME SUBJECT USAGE [SAN]: a key and a certificate signed by the cluster CA.
cert() {
  local name=$1 subj=$2 usage=$3 san=${4:-}
  [ -f "$pki/$name.crt" ] && return 0
  local ext="$pki/$name.ext"
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$usage"
    [ -n "$san" ] && echo "subjectAltName=$san"
  } >"$ext"
  openssl req -new -newkey rsa:2048 -nodes -keyout "$pki/$name.key" -subj "$subj" -out "$pki/$name.csr" 2>/dev/null
  openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 3650 -sha256 -extfile "$ext" -out "$pki/$name.crt.tmp" 2>/dev/null
  mv "$pki/$name.crt.tmp" "$pki/$name.crt"
  rm -f "$pki/$name.csr" "$ext"
}

# kubeconfig_for FILE CERTNAME: a kubeconfig that authenticates with the client certificate CERTNAME.
kubeconfig_for() {
  local file=$1 name=$2
  [ -f "$file" ] && return 0
  cat >"$file.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: berth
  cluster:
    server: $api
    certificate-authority-data: $(base64 -w0 <"$pki/ca.crt")
users:
- name: $name
  user:
    client-certificate-data: $(base64 -w0 <"$pki/$name.crt")
    client-key-data: $(base64 -w0 <"$pki/$name.key")
contexts:
- name: berth
  context:
    cluster: berth
    user: $name
current-context: berth
EOF
  chmod 600 "$file.tmp"
  mv "$file.tmp" "$file"
}

make_pki() {
  mkdir -p "$pki"
  chmod 700 "$pki"
  if [ ! -f "$pki/ca.crt" ]; then
    openssl req -x509 -new -newkey rsa:2048 -nodes -keyout "$pki/ca.key" -days 3650 -sha256 \
      -subj "/CN=berth-k8s-ca" -out "$pki/ca.crt.tmp" 2>/dev/null
    mv "$pki/ca.crt.tmp" "$pki/ca.crt"
  fi
  cert apiserver "/CN=kube-apiserver" serverAuth \
    "IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  # Every component is in system:masters: this cluster exists for tests, not for least privilege.
  cert admin "/O=system:masters/CN=admin" clientAuth
  cert controller-manager "/O=system:masters/CN=system:kube-controller-manager" clientAuth
  cert scheduler "/O=system:masters/CN=system:kube-scheduler" clientAuth
  cert kwok "/O=system:masters/CN=kwok" clientAuth
  if [ ! -f "$pki/sa.pub" ]; then
    openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
    openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub.tmp" 2>/dev/null
    mv "$pki/sa.pub.tmp" "$pki/sa.pub"
  fi
  kubeconfig_for "$kubeconfig" admin
  kubeconfig_for "$k8s_dir/controller-manager.kubeconfig" controller-manager
  kubeconfig_for "$k8s_dir/scheduler.kubeconfig" scheduler
  kubeconfig_for "$k8s_dir/kwok.kubeconfig" kwok
}

port_free() {
  ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# start NAME PORT ARGS...: start NAME detached unless it is already running; PORT (- for none)
# must be free.
start() {
  local name=$1 port=$2
  shift 2
  [ -n "$(pid_of "$name")" ] && return 0
  [ "$port" = - ] || port_free "$port" || die "port $port (for $name) is in use by another process; stop it or choose another port (see scripts/k8s/lib.sh)"
  echo "=== $(date -u +%FT%TZ) starting $name" >>"$logs/$name.log"
  # 8>&-: the daemon must not inherit (and so hold forever) the lock that serialises up.
  setsid "$bin/$name" "$@" </dev/null >>"$logs/$name.log" 2>&1 8>&- &
  echo $! >"$run/$name.pid"
  sleep 0.2
  [ -n "$(pid_of "$name")" ] || { tail -n 30 "$logs/$name.log" >&2; die "$name exited at once; see $logs/$name.log"; }
}

# wait_for WHAT SECONDS COMMAND...: retry COMMAND until it succeeds; fail after SECONDS.
wait_for() {
  local what=$1 secs=$2 deadline
  shift 2
  deadline=$(( $(date +%s) + secs ))
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || die "timed out after ${secs}s waiting for $what; logs are in $logs"
    sleep 0.5
  done
}

etcd_healthy() { curl -sf --max-time 2 "http://127.0.0.1:$etcd_port/health" | grep -q '"health":"true"'; }
api_ready() { kcurl GET /readyz; }
healthz() { curl -sfk --max-time 2 "https://127.0.0.1:$1/healthz"; }
node_ready() {
  kcurl GET "/api/v1/nodes/$1" | jq -e '.status.conditions[]? | select(.type == "Ready" and .status == "True")'
}
default_sa() { kcurl GET /api/v1/namespaces/default/serviceaccounts/default; }

start_all() {
  start etcd "$etcd_port" \
    --name berth \
    --data-dir "$k8s_dir/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" \
    --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$etcd_peer_port" \
    --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
    --initial-cluster "berth=http://127.0.0.1:$etcd_peer_port" \
    --unsafe-no-fsync \
    --log-level warn
  wait_for "etcd on port $etcd_port" 60 etcd_healthy

  start kube-apiserver "$k8s_port" \
    --etcd-servers "http://127.0.0.1:$etcd_port" \
    --bind-address 127.0.0.1 \
    --advertise-address 127.0.0.1 \
    --secure-port "$k8s_port" \
    --endpoint-reconciler-type none \
    --tls-cert-file "$pki/apiserver.crt" \
    --tls-private-key-file "$pki/apiserver.key" \
    --client-ca-file "$pki/ca.crt" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$pki/sa.pub" \
    --service-account-signing-key-file "$pki/sa.key" \
    --service-cluster-ip-range 10.96.0.0/16 \
    --authorization-mode RBAC \
    --allow-privileged \
    --profiling=false \
    --v 1
  wait_for "the API server's /readyz on port $k8s_port" 120 api_ready

  # The controller manager's and the scheduler's client rate limits are raised from their
  # defaults (20 and 50 requests/s) so that creating a hundred workloads at once measures
  # Berth, not the throttled controllers.
  start kube-controller-manager "$cm_port" \
    --kubeconfig "$k8s_dir/controller-manager.kubeconfig" \
    --authentication-kubeconfig "$k8s_dir/controller-manager.kubeconfig" \
    --authorization-kubeconfig "$k8s_dir/controller-manager.kubeconfig" \
    --authentication-skip-lookup \
    --bind-address 127.0.0.1 \
    --secure-port "$cm_port" \
    --leader-elect=false \
    --controllers deployment-controller,replicaset-controller,statefulset-controller,job-controller,garbage-collector-controller,namespace-controller,serviceaccount-controller,root-ca-certificate-publisher-controller,persistentvolume-binder-controller,persistentvolumeclaim-protection-controller,persistentvolume-protection-controller,endpointslice-controller,pod-garbage-collector-controller,clusterrole-aggregation-controller \
    --enable-hostpath-provisioner \
    --kube-api-qps 300 \
    --kube-api-burst 600 \
    --concurrent-deployment-syncs 10 \
    --concurrent-replicaset-syncs 10 \
    --service-account-private-key-file "$pki/sa.key" \
    --root-ca-file "$pki/ca.crt" \
    --use-service-account-credentials=false \
    --profiling=false \
    --v 1

  start kube-scheduler "$sched_port" \
    --kubeconfig "$k8s_dir/scheduler.kubeconfig" \
    --authentication-kubeconfig "$k8s_dir/scheduler.kubeconfig" \
    --authorization-kubeconfig "$k8s_dir/scheduler.kubeconfig" \
    --authentication-skip-lookup \
    --bind-address 127.0.0.1 \
    --secure-port "$sched_port" \
    --leader-elect=false \
    --kube-api-qps 300 \
    --kube-api-burst 600 \
    --profiling=false \
    --v 1

  # KWOK_WORKDIR keeps kwok from reading a user's own kwok configuration.
  KWOK_WORKDIR="$k8s_dir/kwok" start kwok - \
    --kubeconfig "$k8s_dir/kwok.kubeconfig" \
    --config "$stages/node-fast.yaml" \
    --config "$stages/pod-fast.yaml" \
    --manage-all-nodes=false \
    --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
    --node-ip 127.0.0.1 \
    --cidr 10.244.0.1/16

  wait_for "the controller manager's /healthz on port $cm_port" 60 healthz "$cm_port"
  wait_for "the scheduler's /healthz on port $sched_port" 60 healthz "$sched_port"
}

ensure_nodes() {
  local i name
  for ((i = 0; i < nodes; i++)); do
    name="berth-node-$i"
    kapply /api/v1/nodes "$(jq -nc --arg n "$name" '{
      apiVersion: "v1", kind: "Node",
      metadata: {
        name: $n,
        annotations: {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
        labels: {"kubernetes.io/hostname": $n, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "type": "kwok"}
      },
      status: {
        allocatable: {cpu: "32", memory: "256Gi", pods: "110", "ephemeral-storage": "1Ti"},
        capacity: {cpu: "32", memory: "256Gi", pods: "110", "ephemeral-storage": "1Ti"}
      }
    }')"
    # Creating a node adds the not-ready taint; with no kubelet and no node lifecycle controller
    # nothing would lift it, so drop all taints once kwok has marked the node Ready. A node left
    # cordoned (by a test that was killed, say) is made schedulable again.
    wait_for "kwok to mark node $name Ready" 60 node_ready "$name"
    if [ "$(kcurl GET "/api/v1/nodes/$name" | jq '(.spec.taints // [] | length) + (if .spec.unschedulable then 1 else 0 end)')" != 0 ]; then
      kcurl PATCH "/api/v1/nodes/$name" -H 'Content-Type: application/merge-patch+json' \
        -d '{"spec":{"taints":null,"unschedulable":null}}' >/dev/null
    fi
  done
}

# The default StorageClass allows volume expansion: Berth grows a runtime's claim when its
# slots grow, and the API refuses to grow claims of a class that does not allow it. (A class
# made by an older up.sh is patched to allow it.)
ensure_storage() {
  kapply /apis/storage.k8s.io/v1/storageclasses '{
    "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
    "metadata": {"name": "standard", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
    "provisioner": "kubernetes.io/host-path",
    "reclaimPolicy": "Delete",
    "volumeBindingMode": "WaitForFirstConsumer",
    "allowVolumeExpansion": true
  }'
  kcurl PATCH /apis/storage.k8s.io/v1/storageclasses/standard -H 'Content-Type: application/merge-patch+json' \
    -d '{"allowVolumeExpansion": true}' >/dev/null
}

need_tools
bin=$("$here/build.sh")
stages="$(dirname "$bin")/stages"
mkdir -p "$k8s_dir" "$logs" "$run" "$k8s_dir/kwok"
# One up at a time: a concurrent caller waits and then finds the cluster running.
exec 8>"$run/up.lock"
flock 8
make_pki
start_all
ensure_nodes
ensure_storage
wait_for "the default service account" 60 default_sa
echo "$kubeconfig"
