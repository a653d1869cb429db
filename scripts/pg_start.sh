#!/usr/bin/env bash
# Start a throwaway PostgreSQL on 127.0.0.1 for tests and benchmarks, and print its URL.
#
#   eval "$(scripts/pg_start.sh)"     # exports WORKQ_TEST_PG_URL and WORKQ_PG_DIR
#   ...
#   scripts/pg_stop.sh                # stops it and deletes its folder
#
# Environment (all optional):
#   WORKQ_PG_DIR   the cluster's folder (default /tmp/workq-pg); one server per folder
#   WORKQ_PG_PORT  the TCP port (default: a free one, chosen on first start)
#
# Idempotent: a second call with the same folder reuses the running server. The role and
# database are both named workq (password workq, allowed to create databases, as the test
# fixtures make one database per test). The data is disposable: fsync is off (commits still
# survive a crash of the server process, not of the machine).
# Run as root, the server runs as the unprivileged user postgres.
set -euo pipefail
# Under `eval "$(scripts/pg_start.sh)"` a failure must fail the eval too.
trap 'status=$?; [[ $status == 0 ]] || echo false' EXIT

dir="${WORKQ_PG_DIR:-/tmp/workq-pg}"
mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
data="$dir/data"

say() { echo "pg_start: $*" >&2; }

find_bin() {
    local found
    found="$(command -v pg_ctl 2>/dev/null || true)"
    if [[ -z "$found" ]]; then
        found="$(ls -d /usr/lib/postgresql/*/bin/pg_ctl 2>/dev/null | sort -V | tail -n 1 || true)"
    fi
    [[ -n "$found" ]] && dirname "$(readlink -f "$found")"
}

bin="$(find_bin || true)"
if [[ -z "$bin" ]]; then
    say "PostgreSQL is not installed; installing it with apt-get"
    if [[ "$(id -u)" != 0 ]]; then
        say "need root to install PostgreSQL (apt-get install -y postgresql)"
        exit 1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
    bin="$(find_bin)"
fi

# As root, everything that touches the cluster runs as postgres.
if [[ "$(id -u)" == 0 ]]; then
    owner=postgres
    chown "$owner" "$dir"
    chmod 700 "$dir"
    as_owner() { runuser -u "$owner" -- "$@"; }
    # initdb and the server run as postgres: every folder above the cluster must let it in.
    if ! as_owner test -w "$dir"; then
        blocked="$dir"
        probe="$dir"
        while [[ "$probe" != / ]]; do
            probe="$(dirname "$probe")"
            as_owner test -x "$probe" || blocked="$probe"
        done
        say "the postgres user, which runs initdb and the server, cannot reach $dir:"
        say "$blocked is closed to other users ($(stat -c '%A %U' "$blocked"));"
        say "choose a WORKQ_PG_DIR under an open folder such as /tmp, or chmod o+x $blocked"
        exit 1
    fi
else
    owner="$(id -un)"
    as_owner() { "$@"; }
fi

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

if [[ ! -f "$data/PG_VERSION" ]]; then
    as_owner "$bin/initdb" -D "$data" -U postgres --no-sync --auth-local=trust \
        --auth-host=scram-sha-256 -E UTF8 --locale=C.UTF-8 >/dev/null
    port="${WORKQ_PG_PORT:-$(free_port)}"
    cat >>"$data/postgresql.conf" <<EOF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$dir'
max_connections = 300
shared_buffers = 128MB
fsync = off
full_page_writes = off
EOF
fi
port="$(sed -n 's/^port = \([0-9]*\)$/\1/p' "$data/postgresql.conf" | tail -n 1)"

if ! as_owner "$bin/pg_ctl" -D "$data" status >/dev/null 2>&1; then
    as_owner "$bin/pg_ctl" -D "$data" -l "$dir/server.log" -w -t 30 start >/dev/null || {
        say "the server did not start; its log:"
        tail -n 20 "$dir/server.log" >&2
        exit 1
    }
fi

psql() { as_owner "$bin/psql" -h "$dir" -p "$port" -U postgres -d postgres -qAt "$@"; }
if [[ "$(psql -c "SELECT 1 FROM pg_roles WHERE rolname = 'workq'")" != 1 ]]; then
    psql -c "CREATE ROLE workq LOGIN CREATEDB PASSWORD 'workq'"
fi
if [[ "$(psql -c "SELECT 1 FROM pg_database WHERE datname = 'workq'")" != 1 ]]; then
    psql -c "CREATE DATABASE workq OWNER workq"
fi

echo "export WORKQ_TEST_PG_URL='postgresql+psycopg://workq:workq@127.0.0.1:$port/workq'"
echo "export WORKQ_PG_DIR='$dir'"
