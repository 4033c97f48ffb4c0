#!/usr/bin/env bash
# Stop the throwaway PostgreSQL server of scripts/start-postgres.sh (a no-op when it is not running).
#
#   scripts/stop-postgres.sh            # stop; the data stays, start-postgres.sh brings it back
#   scripts/stop-postgres.sh --purge    # stop and delete the cluster
#
# Uses the same LUIGI_PG_DIR as the start script. The task-history outage test calls this while a
# pipeline runs, then the start script again.
set -euo pipefail

PG_DIR="${LUIGI_PG_DIR:-/tmp/luigi-test-postgres}"
DATA="$PG_DIR/data"

as_owner() {
    if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
if [ -n "$BIN" ] && [ -f "$DATA/PG_VERSION" ]; then
    if as_owner "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; then
        # fast: roll back open transactions and disconnect clients now, as an outage would
        as_owner "$BIN/pg_ctl" -D "$DATA" -m fast -w -t 60 stop >&2
    fi
fi
if [ "${1:-}" = "--purge" ]; then
    rm -rf "$PG_DIR"
fi
