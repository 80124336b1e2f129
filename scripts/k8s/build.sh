#!/usr/bin/env bash
# build.sh: build (once) the binaries of a local Kubernetes control plane without containers:
# kube-apiserver, kube-controller-manager, kube-scheduler, kwok (fake nodes) and etcd.
#
#   scripts/k8s/build.sh        build what is missing; prints the bin directory as its last line
#
# Everything is built from the Go module proxy in throwaway modules under the cache directory,
# never in this repository (every go command runs there, so this repository's go.mod and go.sum
# are never read or touched). The cache is keyed by version, so only the first run builds
# (10 to 15 minutes on 2 cores):
#   ${BERTH_K8S_CACHE:-$HOME/.cache/berth-k8s}/v<k8s>-kwok<kwok>-etcd<etcd>/bin/
# The kwok "fast" node and pod stages are copied next to the binaries (stages/).
#
# If etcd cannot be built, Debian's etcd-server is installed and used instead (as root).
set -euo pipefail

K8S_VERSION=1.37.2
KWOK_VERSION=0.8.0
ETCD_VERSION=3.7.0

cache=${BERTH_K8S_CACHE:-${HOME:-/tmp}/.cache/berth-k8s}
key="v${K8S_VERSION}-kwok${KWOK_VERSION}-etcd${ETCD_VERSION}"
root="$cache/$key"
bin="$root/bin"
stages="$root/stages"
binaries=(kube-apiserver kube-controller-manager kube-scheduler kwok etcd)

log() { echo "k8s-build: $*" >&2; }

complete() {
  local b
  for b in "${binaries[@]}"; do [ -x "$bin/$b" ] || return 1; done
  [ -f "$stages/node-fast.yaml" ] && [ -f "$stages/pod-fast.yaml" ]
}

if complete; then
  log "cached: $bin"
  echo "$bin"
  exit 0
fi

command -v go >/dev/null 2>&1 || { log "no Go toolchain on PATH; install Go 1.26 or newer"; exit 1; }
command -v flock >/dev/null 2>&1 || { log "flock is missing; install util-linux (Debian: apt-get install util-linux)"; exit 1; }

mkdir -p "$bin" "$stages" "$root/src"
# One build at a time per cache entry: a second caller waits, then finds everything cached.
exec 9>"$root/.lock"
flock 9
if complete; then
  log "cached: $bin"
  echo "$bin"
  exit 0
fi

# The throwaway modules have no go.sum: -mod=mod lets the go command resolve and record their
# dependencies. GOWORK=off keeps any workspace file around out of it.
export GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 GOTOOLCHAIN=local GOWORK=off
start=$(date +%s)

# gobuild MODDIR OUT PKG [LDFLAGS]: build PKG from the module in MODDIR into OUT, atomically.
gobuild() {
  local moddir=$1 out=$2 pkg=$3 ldflags=${4:-}
  log "building $(basename "$out") ($pkg)"
  (cd "$moddir" && go build -p 2 -trimpath -ldflags "-s -w $ldflags" -o "$out.tmp" "$pkg") >"$root/build-$(basename "$out").log" 2>&1 || {
    tail -n 40 "$root/build-$(basename "$out").log" >&2
    return 1
  }
  mv -f "$out.tmp" "$out"
}

# module_dir MODULE@VERSION: download MODULE@VERSION and print its directory in the module cache.
# Runs outside any module, so no go.mod is consulted or changed.
module_dir() {
  (cd "$root/src" && go mod download -json "$1") | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'
}

# newmod DIR: an empty throwaway module in DIR.
newmod() {
  rm -rf "$1"
  mkdir -p "$1"
  printf 'module berth.local/k8sbuild\n\ngo 1.26\n' >"$1/go.mod"
}

build_kube() {
  local dir="$root/src/kubernetes" moddir b
  newmod "$dir"
  moddir=$(module_dir "k8s.io/kubernetes@v${K8S_VERSION}")
  [ -f "$moddir/go.mod" ] || { log "cannot download the k8s.io/kubernetes module v${K8S_VERSION} (is the Go module proxy reachable?)"; return 1; }
  {
    printf '\nrequire k8s.io/kubernetes v%s\n\nreplace (\n' "$K8S_VERSION"
    # Every staging module that k8s.io/kubernetes replaces with a local directory is published
    # as its own module at v0.<minor>.<patch>.
    sed -n 's|^[[:space:]]*\(k8s\.io/[^[:space:]]*\)[[:space:]]*=>[[:space:]]*\./staging/.*$|\t\1 => \1 v0.'"${K8S_VERSION#*.}"'|p' "$moddir/go.mod"
    printf ')\n'
  } >>"$dir/go.mod"
  local major=${K8S_VERSION%%.*} minor=${K8S_VERSION#*.}
  minor=${minor%%.*}
  local ld="" p
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=v${K8S_VERSION} -X $p.gitMajor=${major} -X $p.gitMinor=${minor}"
    ld+=" -X $p.gitTreeState=clean -X $p.buildDate=1970-01-01T00:00:00Z"
  done
  for b in kube-apiserver kube-controller-manager kube-scheduler; do
    [ -x "$bin/$b" ] && continue
    gobuild "$dir" "$bin/$b" "k8s.io/kubernetes/cmd/$b" "$ld"
  done
}

build_kwok() {
  local dir="$root/src/kwok" moddir
  if [ ! -x "$bin/kwok" ]; then
    newmod "$dir"
    printf '\nrequire sigs.k8s.io/kwok v%s\n' "$KWOK_VERSION" >>"$dir/go.mod"
    gobuild "$dir" "$bin/kwok" sigs.k8s.io/kwok/cmd/kwok
  fi
  moddir=$(module_dir "sigs.k8s.io/kwok@v${KWOK_VERSION}")
  [ -d "$moddir/kustomize/stage" ] || { log "cannot find kwok's stages in sigs.k8s.io/kwok v${KWOK_VERSION}"; return 1; }
  local kind f
  for kind in node pod; do
    : >"$stages/$kind-fast.yaml.tmp"
    for f in "$moddir"/kustomize/stage/"$kind"/fast/*.yaml; do
      [ "$(basename "$f")" = kustomization.yaml ] && continue
      { cat "$f"; printf '\n---\n'; } >>"$stages/$kind-fast.yaml.tmp"
    done
    mv -f "$stages/$kind-fast.yaml.tmp" "$stages/$kind-fast.yaml"
  done
}

build_etcd() {
  [ -x "$bin/etcd" ] && return 0
  local dir="$root/src/etcd"
  newmod "$dir"
  printf '\nrequire go.etcd.io/etcd/server/v3 v%s\n' "$ETCD_VERSION" >>"$dir/go.mod"
  if gobuild "$dir" "$bin/etcd" go.etcd.io/etcd/server/v3; then
    return 0
  fi
  log "building etcd failed; falling back to Debian's etcd-server (no watch progress notifications)"
  if ! command -v etcd >/dev/null 2>&1 && [ ! -x /usr/bin/etcd ]; then
    [ "$(id -u)" = 0 ] || { log "install etcd-server (apt-get install etcd-server) and re-run"; return 1; }
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >&2
    # The package starts a system etcd on the default ports; this cluster runs its own.
    systemctl disable --now etcd >/dev/null 2>&1 || true
  fi
  cp "$(command -v etcd || echo /usr/bin/etcd)" "$bin/etcd"
}

build_etcd
build_kwok
build_kube

complete || { log "build incomplete; see $root/build-*.log"; exit 1; }
log "built in $(( $(date +%s) - start ))s: $bin"
echo "$bin"
