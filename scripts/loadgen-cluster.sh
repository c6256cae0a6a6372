#!/usr/bin/env bash
# scripts/loadgen-cluster.sh LOADGEN MODE [ARG...]: runs loadgen (the
# binary LOADGEN) with a throwaway PostgreSQL (a cluster in a temp dir, on
# a Unix socket, fsync on) and a NATS server (natsd, loopback) for it to
# start cluster nodes on: it adds -pg, -nats and -pg-pid (the postmaster,
# whose processes' CPU loadgen reads) to ARG. Each run of a server gets a
# database of its own there. NATSD names the natsd binary
# (default: bin/natsd; go build -o bin/ ./internal/natstest/natsd). Both
# are stopped and removed when loadgen ends, whatever happens.
#
#   scripts/loadgen-cluster.sh bin/loadgen commands \
#     -bin one=bin/aip-server -bin three=bin/aip-server -nodes three=3
#   scripts/loadgen-cluster.sh bin/loadgen commands \
#     -bin sqlite=bin/aip-server -bin pg=bin/aip-server -store sqlite=sqlite -store pg=postgres
set -euo pipefail

if [ $# -lt 2 ]; then
	echo "usage: $0 LOADGEN MODE [ARG...]" >&2
	exit 2
fi
LOADGEN=$1
shift
NATSD=${NATSD:-bin/natsd}
PGDIR=$(mktemp -d -t edgeaip-loadgen-pg-XXXXXX)
natsd=
pg=

# shellcheck source=asuser.sh
. "$(dirname "$0")/asuser.sh"

stop() {
	local status=$?
	if [ -n "$natsd" ]; then
		kill "$natsd" 2>/dev/null || true
		wait "$natsd" 2>/dev/null || true
	fi
	[ -n "$pg" ] && asuser "$pg/pg_ctl" -D "$PGDIR/db" -m fast stop >/dev/null 2>&1 || true
	rm -rf "$PGDIR"
	exit "$status"
}
trap stop EXIT INT TERM

pg=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
if [ -z "$pg" ]; then
	echo "PostgreSQL is not installed: make deps installs it" >&2
	exit 1
fi
if [ "$(id -u)" -eq 0 ]; then chown postgres "$PGDIR"; fi
asuser "$pg/initdb" -D "$PGDIR/db" -A trust -U aip -E UTF8 --locale=C >"$PGDIR/initdb.log" 2>&1
# Enough connections for three nodes' writers and readers.
asuser "$pg/pg_ctl" -D "$PGDIR/db" -o "-k $PGDIR -p 5432 -c listen_addresses= -c max_connections=300" \
	-l "$PGDIR/postgres.log" -w start >/dev/null
"$NATSD" -port 0 >"$PGDIR/nats.url" 2>"$PGDIR/natsd.log" &
natsd=$!
for _ in $(seq 100); do
	[ -s "$PGDIR/nats.url" ] && break
	sleep 0.1
done
NATS=$(head -n 1 "$PGDIR/nats.url")
PGURL="postgres://aip@/postgres?host=$PGDIR&port=5432&sslmode=disable"
echo "PostgreSQL at $PGDIR, NATS at $NATS (natsd pid $natsd)"
"$LOADGEN" "$@" -pg "$PGURL" -nats "$NATS" -pg-pid "$(head -n 1 "$PGDIR/db/postmaster.pid")"
