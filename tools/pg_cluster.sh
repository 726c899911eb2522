#!/usr/bin/env bash
# A throw-away PostgreSQL 15 cluster for ratchet's tests and benchmarks.
#
# Usage: tools/pg_cluster.sh [-v] start|stop|restart|down|up|status DIR
#   start    create the cluster (once) and start it; -v prints DIR/env
#   stop     stop it (fast mode) and remove DIR
#   restart  restart the server on the same port (tests simulate a failover)
#   down     stop the server, keeping its data and port (an outage)
#   up       start it again after `down`, on the same port
#   status   exit 0 when the server runs, 1 when not
#
# DIR receives what clients need: DIR/env (shell-sourceable settings),
# DIR/pgpass (mode 0600, the `ratchet` role's password) and DIR/log. The
# server itself lives in a short private folder under /tmp that DIR/server
# links to: initdb and pg_ctl refuse to run as root, so under root the
# server runs as the `postgres` system user, which may not be able to reach
# DIR (a build tree under a root-owned 0700 folder); a short path also keeps
# the unix socket below the 107-byte limit of sun_path.
#
# The server listens on 127.0.0.1 only, on a free port, with scram-sha-256
# for TCP logins; its unix socket (in DIR/server) lets the superuser in
# without a password. The password is never printed.
set -euo pipefail

readonly PG_BIN=/usr/lib/postgresql/15/bin
readonly SERVER_PREFIX=/tmp/ratchet-pg.

verbose=0
if [ "${1:-}" = -v ]; then
  verbose=1
  shift
fi
if [ $# -ne 2 ]; then
  echo "usage: $0 [-v] start|stop|restart|down|up|status DIR" >&2
  exit 2
fi
cmd=$1
dir_arg=$2

die() {
  echo "pg_cluster: $*" >&2
  exit 1
}

[ -x "$PG_BIN/initdb" ] || die "PostgreSQL 15 is not installed ($PG_BIN/initdb is missing); run tools/deps.sh"
case "$dir_arg" in
  *[[:space:]\'\"\\\$\`]*) die "DIR must not contain whitespace, quotes, backslashes or \$: '$dir_arg'" ;;
esac
dir=$(realpath -m -- "$dir_arg")

is_root=0
[ "$(id -u)" -eq 0 ] && is_root=1

# Runs a server program as the user that owns the cluster, from a folder
# that user can enter (postgres programs fail when they cannot stat the cwd).
as_owner() {
  if [ "$is_root" -eq 1 ]; then
    command -v runuser >/dev/null || die "runuser (util-linux) is needed to run PostgreSQL as 'postgres' under root"
    (cd / && runuser -u postgres -- "$@")
  else
    (cd / && "$@")
  fi
}

server_dir() { readlink -- "$dir/server" 2>/dev/null || true; }

server_running() {
  local srv=$1
  [ -n "$srv" ] && [ -f "$srv/data/PG_VERSION" ] && as_owner "$PG_BIN/pg_ctl" -D "$srv/data" status >/dev/null 2>&1
}

log_tail() {
  local srv=$1
  if [ -f "$srv/log" ]; then
    echo "--- last lines of $dir/log ---" >&2
    tail -n 25 "$srv/log" >&2 || true
  fi
}

# Servers whose DIR was deleted without `stop` (a removed build tree, a
# killed test run) would run forever: stop them and remove their folders.
sweep_orphans() {
  local srv owner
  for srv in "$SERVER_PREFIX"*; do
    [ -f "$srv/owner" ] || continue
    owner=$(cat "$srv/owner" 2>/dev/null) || continue
    [ "$(readlink -- "$owner/server" 2>/dev/null || true)" = "$srv" ] && continue
    if [ -f "$srv/data/postmaster.pid" ]; then
      as_owner "$PG_BIN/pg_ctl" -D "$srv/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf -- "$srv" 2>/dev/null || true
  done
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

pick_port() {
  local p
  for _ in $(seq 1 50); do
    p=$((20000 + RANDOM % 40000))
    port_in_use "$p" || {
      echo "$p"
      return 0
    }
  done
  die "found no free TCP port on 127.0.0.1 after 50 tries"
}

# Starts the server; when the port was taken meanwhile (another cluster
# started by a parallel build), moves to another one.
start_server() {
  local srv=$1 port lines
  for attempt in 1 2 3 4 5; do
    port=$(cat "$srv/port")
    lines=$(wc -l <"$srv/log" 2>/dev/null || echo 0)
    if as_owner "$PG_BIN/pg_ctl" -D "$srv/data" -l "$srv/log" -w -t 60 start >/dev/null 2>&1; then
      return 0
    fi
    if [ "$attempt" -lt 5 ] && tail -n +"$((lines + 1))" "$srv/log" | grep -q "could not bind\|Address already in use"; then
      port=$(pick_port) || exit 1
      set_port "$srv" "$port"
      continue
    fi
    log_tail "$srv"
    die "could not start PostgreSQL (data in $srv/data, port $port)"
  done
}

set_port() {
  local srv=$1 port=$2
  echo "$port" >"$srv/port"
  echo "port = $port" >"$srv/data/ratchet_port.conf"
  [ "$is_root" -eq 1 ] && chown postgres: "$srv/port" "$srv/data/ratchet_port.conf"
  return 0
}

admin_url() {
  local srv=$1
  echo "postgresql://postgres@/postgres?host=$srv&port=$(cat "$srv/port")"
}

admin_psql() {
  local srv=$1
  shift
  "$PG_BIN/psql" -X -q -v ON_ERROR_STOP=1 -h "$srv" -p "$(cat "$srv/port")" -U postgres "$@"
}

create_cluster() {
  local srv
  mkdir -p -- "$dir"
  srv=$(mktemp -d "${SERVER_PREFIX}XXXXXX") || die "could not create a folder under /tmp"
  # The link first, so a parallel sweep never takes the new folder for an orphan.
  ln -sfn -- "$srv" "$dir/server"
  echo "$dir" >"$srv/owner"
  : >"$srv/log"
  if [ "$is_root" -eq 1 ]; then
    id postgres >/dev/null 2>&1 || die "running as root needs the 'postgres' system user (apt-get install postgresql)"
    chown -R postgres: "$srv"
  fi
  chmod 0700 "$srv"

  if ! as_owner "$PG_BIN/initdb" -D "$srv/data" -U postgres -A trust -E UTF8 --no-locale --no-sync >>"$srv/log" 2>&1; then
    log_tail "$srv"
    die "initdb failed in $srv/data"
  fi
  as_owner tee "$srv/data/pg_hba.conf" >/dev/null <<EOF
# The superuser through the unix socket only (the folder is private); every
# TCP login, from 127.0.0.1 only, proves a password.
local all postgres trust
host  all all 127.0.0.1/32 scram-sha-256
EOF
  as_owner tee "$srv/data/ratchet.conf" >/dev/null <<EOF
listen_addresses = '127.0.0.1'
include_if_exists = 'ratchet_port.conf'
unix_socket_directories = '$srv'
max_connections = 200
shared_buffers = 64MB
fsync = on
synchronous_commit = on
password_encryption = scram-sha-256
log_min_messages = warning
log_line_prefix = '%m [%p] %q%u@%d '
EOF
  echo "include = 'ratchet.conf'" | as_owner tee -a "$srv/data/postgresql.conf" >/dev/null
  local port
  port=$(pick_port) || exit 1
  set_port "$srv" "$port"
  ln -sfn -- "$srv/log" "$dir/log"
}

# The role, its database and a foreign database; the password goes to the
# server on stdin (never on a command line, where ps would show it) and to
# DIR/pgpass.
create_roles() {
  local srv=$1 port password
  port=$(cat "$srv/port")
  password=$(od -An -tx1 -N18 /dev/urandom | tr -d ' \n')
  printf '%s\n' \
    "SET log_min_error_statement = panic;" \
    "CREATE ROLE ratchet LOGIN PASSWORD '$password';" \
    "CREATE DATABASE ratchet OWNER ratchet;" \
    "CREATE DATABASE not_ratchet;" \
    '\connect not_ratchet' \
    "CREATE TABLE invoices (id bigint PRIMARY KEY, customer text NOT NULL, amount numeric NOT NULL);" \
    "INSERT INTO invoices VALUES (1, 'ACME', 12.50), (2, 'Initech', 99.00);" \
    "GRANT SELECT ON invoices TO ratchet;" |
    admin_psql "$srv" -d postgres >/dev/null 2>"$dir/.psql-err" || {
    cat "$dir/.psql-err" >&2
    rm -f "$dir/.psql-err"
    die "could not create the role 'ratchet' and its databases on port $port"
  }
  rm -f "$dir/.psql-err"
  (
    umask 077
    printf '127.0.0.1:%s:*:ratchet:%s\nlocalhost:%s:*:ratchet:%s\n' "$port" "$password" "$port" "$password" >"$dir/pgpass"
  )
  chmod 0600 "$dir/pgpass"
}

write_env() {
  local srv=$1 port
  port=$(cat "$srv/port")
  cat >"$dir/env" <<EOF
RATCHET_TEST_PG_URL='postgresql://ratchet@127.0.0.1:$port/ratchet'
PGPASSFILE='$dir/pgpass'
RATCHET_TEST_PG_PORT='$port'
RATCHET_TEST_PG_DIR='$dir'
RATCHET_TEST_PG_ADMIN='$(admin_url "$srv")'
EOF
}

do_start() {
  local srv
  sweep_orphans
  srv=$(server_dir)
  if [ -n "$srv" ] && [ ! -f "$srv/data/PG_VERSION" ]; then
    # /tmp was cleaned under a kept DIR, or a start died halfway: begin anew.
    rm -rf -- "$srv" "$dir/server" "$dir/env" "$dir/pgpass" "$dir/log"
    srv=""
  fi
  if [ -z "$srv" ]; then
    create_cluster
    srv=$(server_dir)
  fi
  if ! server_running "$srv"; then
    start_server "$srv"
  fi
  if [ ! -s "$dir/pgpass" ] || [ ! -s "$dir/env" ]; then
    create_roles "$srv"
  fi
  # The port may have moved since the last start.
  local port
  port=$(cat "$srv/port")
  if ! grep -q "^127.0.0.1:$port:" "$dir/pgpass"; then
    sed -i "s/^\(127.0.0.1\|localhost\):[0-9]*:/\1:$port:/" "$dir/pgpass"
  fi
  write_env "$srv"
  [ "$verbose" -eq 1 ] && cat "$dir/env"
  return 0
}

do_stop() {
  local srv
  srv=$(server_dir)
  if [ -n "$srv" ] && [ -f "$srv/data/postmaster.pid" ]; then
    if ! as_owner "$PG_BIN/pg_ctl" -D "$srv/data" -m fast -w -t 60 stop >/dev/null 2>&1 &&
      server_running "$srv"; then
      log_tail "$srv"
      die "could not stop PostgreSQL (data in $srv/data)"
    fi
  fi
  [ -n "$srv" ] && rm -rf -- "$srv"
  rm -rf -- "$dir"
}

do_restart() {
  local srv
  srv=$(server_dir)
  if [ -z "$srv" ] || [ ! -f "$srv/data/PG_VERSION" ]; then
    die "no cluster in $dir (run: $0 start $dir)"
  fi
  # Fast mode, as a failover looks to clients: sessions are cut (57P01),
  # then the server accepts connections again on the same port.
  if ! as_owner "$PG_BIN/pg_ctl" -D "$srv/data" -l "$srv/log" -m fast -w -t 60 restart >/dev/null 2>&1; then
    log_tail "$srv"
    die "could not restart PostgreSQL (data in $srv/data, port $(cat "$srv/port"))"
  fi
}

existing_server() {
  local srv
  srv=$(server_dir)
  if [ -z "$srv" ] || [ ! -f "$srv/data/PG_VERSION" ]; then
    die "no cluster in $dir (run: $0 start $dir)"
  fi
  echo "$srv"
}

# An outage as clients see one: sessions are cut and connections refused
# until `up`, which keeps the port, so clients come back at the same URL.
do_down() {
  local srv
  srv=$(existing_server) || exit 1
  if ! as_owner "$PG_BIN/pg_ctl" -D "$srv/data" -m fast -w -t 60 stop >/dev/null 2>&1 &&
    server_running "$srv"; then
    log_tail "$srv"
    die "could not stop PostgreSQL (data in $srv/data)"
  fi
}

do_up() {
  local srv
  srv=$(existing_server) || exit 1
  if ! as_owner "$PG_BIN/pg_ctl" -D "$srv/data" -l "$srv/log" -w -t 60 start >/dev/null 2>&1; then
    log_tail "$srv"
    die "could not start PostgreSQL again on port $(cat "$srv/port") (data in $srv/data)"
  fi
}

case "$cmd" in
  start) do_start ;;
  stop) do_stop ;;
  restart) do_restart ;;
  down) do_down ;;
  up) do_up ;;
  status) server_running "$(server_dir)" ;;
  *) die "unknown command '$cmd' (start, stop, restart, down, up or status)" ;;
esac
