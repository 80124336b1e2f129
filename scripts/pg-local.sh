#!/usr/bin/env bash
# pg-local.sh: a throwaway local PostgreSQL cluster for tests, benchmarks and `make run`.
#
#   scripts/pg-local.sh start   initialise (first time) and start; prints the database URL
#   scripts/pg-local.sh stop    stop the cluster (data kept)
#   scripts/pg-local.sh destroy stop and delete the cluster
#   scripts/pg-local.sh url     print the database URL
#
# BERTH_PG_DIR (default: ${TMPDIR:-/tmp}/berth-pg) and BERTH_PG_PORT (default 55432) choose where
# it lives. The cluster listens on 127.0.0.1 and trusts local connections, with one exception:
# a client whose connection comes from a second loopback address, 127.0.0.2 (it binds its
# socket there), must give a password (scram-sha-256), so that tests can prove credentials
# against the server's own authentication. pg_hba.conf matches a client's address, not the
# one it connected to, so the rule names the source. A cluster made before the rule gets it at
# its next `start` (a reload: running clients are kept). For development, never production.
# PostgreSQL refuses to run as root, so as root the cluster belongs to the `postgres` system
# user.
set -euo pipefail

dir=${BERTH_PG_DIR:-${TMPDIR:-/tmp}/berth-pg}
port=${BERTH_PG_PORT:-55432}
url="postgres://postgres@127.0.0.1:${port}/postgres?sslmode=disable"
password_addr=127.0.0.2
# First match wins in pg_hba.conf: the rule goes before the trust lines.
password_rule="host    all             all             ${password_addr}/32            scram-sha-256"

bindir=${BERTH_PG_BINDIR:-}
if [ -z "$bindir" ]; then
  if command -v pg_ctl >/dev/null 2>&1; then
    bindir=$(dirname "$(command -v pg_ctl)")
  else
    bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
  fi
fi
if [ -z "$bindir" ] || [ ! -x "$bindir/pg_ctl" ]; then
  echo "pg-local: no PostgreSQL server binaries found; install them (Debian: apt-get install postgresql) or set BERTH_PG_BINDIR" >&2
  exit 1
fi

as_owner() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

start() {
  if [ ! -f "$dir/PG_VERSION" ]; then
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres: "$dir"
    as_owner "$bindir/initdb" -D "$dir" -U postgres --auth=trust --encoding=UTF8 --no-instructions >"$dir.initdb.log" 2>&1 || {
      cat "$dir.initdb.log" >&2; exit 1; }
    cat >>"$dir/postgresql.conf" <<CONF
listen_addresses = '127.0.0.1'
port = ${port}
unix_socket_directories = ''
max_connections = 300
fsync = off
synchronous_commit = off
full_page_writes = off
shared_buffers = 256MB
CONF
  fi
  # pg_stat_statements: make bench reports where each resource's database time goes. Added to
  # a cluster made before it was set too; a running one takes it at its next start.
  if ! grep -q "^shared_preload_libraries" "$dir/postgresql.conf"; then
    as_owner sh -c "printf '%s\n' \"shared_preload_libraries = 'pg_stat_statements'\" \"pg_stat_statements.track = all\" >>'$dir/postgresql.conf'"
  fi
  # The password rule, first in pg_hba.conf; a running cluster takes it at a reload.
  local hba_changed=
  if ! grep -q "^host[[:space:]].*[[:space:]]${password_addr}/32[[:space:]]" "$dir/pg_hba.conf"; then
    as_owner sh -c 'awk -v rule="$2" "$3" "$1" >"$1.new" && cat "$1.new" >"$1" && rm "$1.new"' sh "$dir/pg_hba.conf" "$password_rule" \
      '!done && /^[[:space:]]*[^#[:space:]]/ { print "# Connections from this address must give a password (scripts/pg-local.sh)."; print rule; done = 1 } { print }'
    hba_changed=1
  fi
  if as_owner "$bindir/pg_ctl" -D "$dir" status >/dev/null 2>&1; then
    if [ -n "$hba_changed" ]; then
      as_owner "$bindir/pg_ctl" -D "$dir" reload >/dev/null
    fi
    echo "$url"
    return
  fi
  as_owner "$bindir/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 start >/dev/null || {
    tail -n 30 "$dir/server.log" >&2; exit 1; }
  echo "$url"
}

stop() {
  if [ -f "$dir/PG_VERSION" ]; then
    as_owner "$bindir/pg_ctl" -D "$dir" -m fast -w stop >/dev/null 2>&1 || true
  fi
}

case "${1:-start}" in
  start) start ;;
  stop) stop ;;
  destroy) stop; rm -rf "$dir" "$dir.initdb.log" ;;
  url) echo "$url" ;;
  *) echo "usage: $0 start|stop|destroy|url" >&2; exit 2 ;;
esac
