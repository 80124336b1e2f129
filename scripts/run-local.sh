#!/usr/bin/env bash
# run-local.sh: run the agent on the example provisioner set. Without BERTH_DATABASE_URL it
# starts the throwaway local PostgreSQL (scripts/pg-local.sh) and uses a `berth` database there.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
if [ -z "${BERTH_DATABASE_URL:-}" ]; then
  admin=$("$root/scripts/pg-local.sh" start)
  psql "$admin" -qtAc "SELECT 1 FROM pg_database WHERE datname = 'berth'" | grep -q 1 \
    || psql "$admin" -qc "CREATE DATABASE berth"
  export BERTH_DATABASE_URL="${admin/\/postgres\?/\/berth?}"
  echo "run-local: using the local throwaway database $BERTH_DATABASE_URL" >&2
fi
exec "$root/bin/berth" run --provisioners "${BERTH_PROVISIONERS_FILE:-$root/examples/provisioners.json}" "$@"
