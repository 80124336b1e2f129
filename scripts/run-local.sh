#!/usr/bin/env bash
# run-local.sh (make run): Berth to try out on one machine. It starts `berth dev-hosts`, local
# stand-ins for the runtime hosts of a static pool, writing their provisioner set to a
# temporary file, then the agent (`berth run`) on that set. Ctrl-C (or SIGTERM) stops both.
#
# The agent uses BERTH_DATABASE_URL when it is set, else its embedded database (its first log
# line says where). The hosts listen on 127.0.0.1 from port BERTH_DEV_HOSTS_BASE_PORT (default
# 9101; 0: free ports), BERTH_DEV_HOSTS of them (default 3), so the pool stays the same from
# one run to the next. Arguments go to `berth run` (e.g. --log-level debug).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
berth="$root/bin/berth"
dir=$(mktemp -d "${TMPDIR:-/tmp}/berth-run.XXXXXX")
set_file="$dir/provisioners.json"
hosts_pid=""
agent_pid=""

say() { echo "run-local: $*" >&2; }

# stop ends the agent first (it may be probing the hosts), then the hosts, waiting for each;
# a second Ctrl-C does not cut it short.
stop() {
  trap '' INT TERM
  local pid
  for pid in $agent_pid $hosts_pid; do
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    fi
  done
  rm -rf "$dir"
}
trap stop EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

"$berth" dev-hosts --count "${BERTH_DEV_HOSTS:-3}" --base-port "${BERTH_DEV_HOSTS_BASE_PORT:-9101}" --write "$set_file" &
hosts_pid=$!
# dev-hosts writes the set once every host listens; it exits at once when it cannot.
until [ -s "$set_file" ]; do
  if ! kill -0 "$hosts_pid" 2>/dev/null; then
    wait "$hosts_pid" || true
    say "berth dev-hosts failed (see above); nothing is running"
    exit 1
  fi
  sleep 0.1
done
say "dev hosts up, their provisioner set is $set_file; starting the agent (Ctrl-C stops both)"

"$berth" run --provisioners "$set_file" --capacity-interval 5s --health-interval 15s "$@" &
agent_pid=$!

# The run lasts as long as the agent; the trap then stops the hosts.
status=0
wait "$agent_pid" || status=$?
say "the agent stopped (exit status $status); stopping the dev hosts"
exit "$status"
