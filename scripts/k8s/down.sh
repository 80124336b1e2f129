#!/usr/bin/env bash
# down.sh: stop the local Kubernetes control plane started by up.sh.
#
#   scripts/k8s/down.sh          stop every component (SIGTERM, then SIGKILL after 15s); state kept
#   scripts/k8s/down.sh --purge  also delete the state directory (certificates, etcd data, logs)
#
# The built binaries stay cached. Only processes recorded in the PID files are signalled.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib.sh
. "$here/lib.sh"

purge=false
case "${1:-}" in
  "") ;;
  --purge) purge=true ;;
  *) echo "usage: $0 [--purge]" >&2; exit 2 ;;
esac

stop() {
  local name=$1 pid i
  pid=$(pid_of "$name")
  if [ -n "$pid" ]; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 150; i++)); do
      [ -n "$(pid_of "$name")" ] || break
      sleep 0.1
    done
    if [ -n "$(pid_of "$name")" ]; then
      log "$name (pid $pid) ignored SIGTERM; killing it"
      kill -KILL "$pid" 2>/dev/null || true
      for ((i = 0; i < 50; i++)); do
        [ -n "$(pid_of "$name")" ] || break
        sleep 0.1
      done
    fi
    [ -z "$(pid_of "$name")" ] || die "$name (pid $pid) is still running"
  fi
  rm -f "$run/$name.pid"
}

if [ -d "$run" ]; then
  for ((c = ${#components[@]} - 1; c >= 0; c--)); do
    stop "${components[$c]}"
  done
fi

if $purge; then
  rm -rf "$k8s_dir"
fi
