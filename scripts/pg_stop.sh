#!/usr/bin/env bash
# Stop the throwaway PostgreSQL that scripts/pg_start.sh started, and delete its folder.
#
#   scripts/pg_stop.sh            # the server in $WORKQ_PG_DIR (default /tmp/workq-pg)
#   scripts/pg_stop.sh --keep     # stop it, keep the data for the next start
#
# Does nothing (and succeeds) when no server runs there.
set -euo pipefail

dir="${WORKQ_PG_DIR:-/tmp/workq-pg}"
data="$dir/data"
keep=false
[[ "${1:-}" == "--keep" ]] && keep=true

if [[ -f "$data/PG_VERSION" ]]; then
    pg_ctl="$(command -v pg_ctl 2>/dev/null || ls -d /usr/lib/postgresql/*/bin/pg_ctl | sort -V | tail -n 1)"
    if [[ "$(id -u)" == 0 ]]; then
        runuser -u postgres -- "$pg_ctl" -D "$data" -m fast -w stop >/dev/null 2>&1 || true
    else
        "$pg_ctl" -D "$data" -m fast -w stop >/dev/null 2>&1 || true
    fi
fi
# Delete only what pg_start.sh made: a folder holding a cluster (and its log) and no more.
if [[ "$keep" == false && -f "$data/PG_VERSION" ]]; then
    rm -rf "$data" "$dir/server.log"
    rmdir "$dir" 2>/dev/null || true
fi
