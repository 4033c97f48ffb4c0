#!/usr/bin/env bash
# Start a throwaway PostgreSQL server for the task-history tests, and print its SQLAlchemy URL.
#
#   eval "$(scripts/start-postgres.sh)"     # exports LUIGI_TEST_POSTGRES_URL
#
# Idempotent: installs Debian's `postgresql` when missing (as root), creates the cluster once, starts it
# unless it already runs, and creates the test role and database once. The server listens on 127.0.0.1
# only. As root, the cluster belongs to the `postgres` user (PostgreSQL refuses to run as root).
# Settings (environment): LUIGI_PG_DIR (default /tmp/luigi-test-postgres), LUIGI_PG_PORT (default 54329).
# scripts/stop-postgres.sh stops it (and removes it with --purge).
set -euo pipefail

PG_DIR="${LUIGI_PG_DIR:-/tmp/luigi-test-postgres}"
PG_PORT="${LUIGI_PG_PORT:-54329}"
PG_DB=luigi_test
PG_ROLE=luigi_test
PG_PASSWORD=luigi_test
DATA="$PG_DIR/data"
SOCKETS="$PG_DIR/run"
LOG="$PG_DIR/server.log"

say() { echo "start-postgres: $*" >&2; }

pg_bindir() {
    local dir
    dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    if [ -n "$dir" ] && [ -x "$dir/initdb" ]; then echo "$dir"; fi
}

install_postgres() {
    if [ -n "$(pg_bindir)" ]; then return; fi
    if [ "$(id -u)" != 0 ]; then
        say "PostgreSQL is not installed and installing it needs root: apt-get install postgresql"
        exit 1
    fi
    say "installing Debian's postgresql package"
    apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
}

# Run a PostgreSQL command as the cluster owner: `postgres` when we are root, else ourselves.
as_owner() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

create_cluster() {
    mkdir -p "$PG_DIR" "$SOCKETS"
    if [ "$(id -u)" = 0 ]; then chown postgres:postgres "$PG_DIR" "$SOCKETS"; fi
    if [ -f "$DATA/PG_VERSION" ]; then return; fi
    say "creating a cluster in $DATA"
    as_owner "$BIN/initdb" -D "$DATA" --auth-local=trust --auth-host=scram-sha-256 \
        --username=postgres -E UTF8 --locale=C.UTF-8 >&2
}

start_server() {
    if as_owner "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then return; fi
    say "starting PostgreSQL on 127.0.0.1:$PG_PORT (log: $LOG)"
    as_owner "$BIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 start \
        -o "-c listen_addresses=127.0.0.1 -c port=$PG_PORT -c unix_socket_directories=$SOCKETS -c fsync=off" >&2
}

create_database() {
    local psql=("$BIN/psql" -h "$SOCKETS" -p "$PG_PORT" -U postgres -v ON_ERROR_STOP=1 -qtA)
    if [ "$(as_owner "${psql[@]}" -d postgres -c "SELECT 1 FROM pg_roles WHERE rolname='$PG_ROLE'")" != 1 ]; then
        as_owner "${psql[@]}" -d postgres -c "CREATE ROLE $PG_ROLE LOGIN PASSWORD '$PG_PASSWORD'" >&2
    fi
    if [ "$(as_owner "${psql[@]}" -d postgres -c "SELECT 1 FROM pg_database WHERE datname='$PG_DB'")" != 1 ]; then
        as_owner "${psql[@]}" -d postgres -c "CREATE DATABASE $PG_DB OWNER $PG_ROLE" >&2
    fi
}

install_postgres
BIN=$(pg_bindir)
create_cluster
start_server
create_database
URL="postgresql+psycopg://$PG_ROLE:$PG_PASSWORD@127.0.0.1:$PG_PORT/$PG_DB"
echo "$URL" > "$PG_DIR/url"
echo "export LUIGI_TEST_POSTGRES_URL=$URL"
