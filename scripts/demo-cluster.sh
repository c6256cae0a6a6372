#!/usr/bin/env bash
# make demo-cluster: cluster mode on loopback. It starts PostgreSQL (a
# throwaway cluster in a temp dir), NATS (natsd, asking for a user and a
# password made for the run: a client without them is refused) and
# three aip-server nodes sharing them, three agents, dispatches a fleet through
# node-1 to the three devices, and kills node-1 (kill -9) while the fleet
# runs. The agents linked to node-1 move to other nodes on their own
# (each has every node's URL), a survivor adopts the fleet and its
# devices' tasks, and the fleet completes: each step ran once on each device (each appends a line
# to a file of its own). It cleans everything up, whatever happens.
set -euo pipefail

BIN=${BIN:-bin}
BASE=${DEMO_CLUSTER_PORT:-8710}
PGPORT=$((BASE + 9))
WORK=$(mktemp -d -t edgeaip-demo-cluster-XXXXXX)
# PostgreSQL's own dir, which its user must be able to reach.
PGDIR=$(mktemp -d -t edgeaip-demo-cluster-pg-XXXXXX)
pids=()
pg=

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

# shellcheck source=asuser.sh
. "$(dirname "$0")/asuser.sh"

stop() {
	local status=$?
	for pid in "${pids[@]}"; do
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	[ -n "$pg" ] && asuser "$pg/pg_ctl" -D "$PGDIR/db" -m immediate stop >/dev/null 2>&1 || true
	# The logs of what it started, if it started anything: a busy port
	# stops it before, with its own message.
	if [ "$status" -ne 0 ] && compgen -G "$WORK/*.log" >/dev/null; then
		echo "demo-cluster failed; logs:" >&2
		tail -n 15 "$WORK"/*.log >&2 || true
	fi
	# DEMO_CLUSTER_LOGS=DIR keeps the logs there.
	if [ -n "${DEMO_CLUSTER_LOGS:-}" ]; then
		mkdir -p "$DEMO_CLUSTER_LOGS" && cp "$WORK"/*.log "$DEMO_CLUSTER_LOGS"/ || true
	fi
	rm -rf "$WORK" "$PGDIR"
	exit "$status"
}
trap stop EXIT INT TERM

# wait_for CMD...: retries CMD for up to 60 s.
wait_for() {
	for _ in $(seq 300); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.2
	done
	echo "timed out waiting for: $*" >&2
	return 1
}

for port in $(seq "$BASE" "$PGPORT"); do
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		echo "port $port on 127.0.0.1 is in use: run make demo-cluster DEMO_CLUSTER_PORT=another (it uses 10 ports from there)" >&2
		exit 1
	fi
done
pg=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
if [ -z "$pg" ]; then
	echo "PostgreSQL is not installed: make deps installs it" >&2
	exit 1
fi

say "PostgreSQL on 127.0.0.1:$PGPORT, NATS on loopback (data in $WORK)"
if [ "$(id -u)" -eq 0 ]; then chown postgres "$PGDIR"; fi
asuser "$pg/initdb" -D "$PGDIR/db" -A trust -U aip >"$WORK/initdb.log" 2>&1
asuser "$pg/pg_ctl" -D "$PGDIR/db" -o "-k $PGDIR -p $PGPORT -c listen_addresses=127.0.0.1" -l "$PGDIR/postgres.log" -w start >/dev/null
asuser "$pg/createdb" -h 127.0.0.1 -p "$PGPORT" -U aip edgeaip
STORE="postgres://aip@127.0.0.1:$PGPORT/edgeaip?sslmode=disable"
# Every client NATS lets in is trusted as a node (README, "Cluster
# mode"): NATS asks for a user and password, as it must in production
# (with TLS there too; this one is on loopback).
(umask 077 && head -c 24 /dev/urandom | base64 | tr -d '/+=' >"$WORK/nats.password")
"$BIN/natsd" -port 0 -user aip -password-file "$WORK/nats.password" >"$WORK/nats.url" 2>"$WORK/natsd.log" &
pids+=($!)
wait_for test -s "$WORK/nats.url"
NATS_ADDR=$(head -n 1 "$WORK/nats.url")
NATS_ADDR=${NATS_ADDR#nats://}
NATS="nats://aip:$(cat "$WORK/nats.password")@$NATS_ADDR"
echo "store $STORE, NATS nats://aip:xxxxx@$NATS_ADDR (user aip, a password made for this run)"
# nats_refuses_strangers: a client without the credentials is refused.
nats_refuses_strangers() {
	local reply
	exec 3<>"/dev/tcp/${NATS_ADDR%:*}/${NATS_ADDR#*:}"
	read -r -t 5 _ <&3 # INFO
	printf 'CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\n' >&3
	read -r -t 5 reply <&3 || true
	exec 3<&-
	echo "a NATS client without credentials: ${reply%$'\r'}"
	[[ $reply == *"Authorization Violation"* ]]
}
nats_refuses_strangers

node_pid=()
start_node() { # start_node N: node-N on port BASE+N, with node-1's operator token
	local n=$1
	mkdir -p "$WORK/node-$n"
	[ "$n" -gt 1 ] && cp "$WORK/node-1/admin.token" "$WORK/node-$n/"
	"$BIN/aip-server" --listen "127.0.0.1:$((BASE + n))" --data "$WORK/node-$n" --store "$STORE" --nats "$NATS" \
		--node-id "node-$n" --device-grace 30s >"$WORK/node-$n.log" 2>&1 &
	node_pid[$n]=$!
	pids+=($!)
	wait_for curl -fsS "http://127.0.0.1:$((BASE + n))/api/health"
}
say "three aip-server nodes: node-1, node-2, node-3 on ports $((BASE + 1))-$((BASE + 3))"
for n in 1 2 3; do start_node "$n"; done
export AIP_TOKEN=$(cat "$WORK/node-1/admin.token")
node() { echo "http://127.0.0.1:$((BASE + $1))"; }

# Each agent sees its own files dir as /demo: one plan for all writes each
# device's lines to its own files.
start_agent() { # start_agent N: agent kiosk-N, with every node's URL
	mkdir -p "$WORK/files-$1"
	"$BIN/aip-agent" --server "ws://127.0.0.1:$((BASE + 1))/ws" --server "ws://127.0.0.1:$((BASE + 2))/ws" \
		--server "ws://127.0.0.1:$((BASE + 3))/ws" --id "kiosk-$1" --token-file "$WORK/kiosk-$1.token" \
		--tools "stock=$BIN/tools" --tools "fixtures=testdata/tools" --allow-dir "$WORK/files-$1:/demo" \
		--data "$WORK/agent-$1" >>"$WORK/agent-$1.log" 2>&1 &
	pids+=($!)
}
say "three agents, enrolled through node-1, each with the three nodes' URLs (each picks its own order)"
for n in 1 2 3; do
	AIP_SERVER=$(node 1) "$BIN/aipctl" device enroll "kiosk-$n" --label site=demo --out "$WORK/kiosk-$n.token" 2>/dev/null
	start_agent "$n"
done
linked() { # linked: all three devices are linked, to live nodes
	curl -fsS -H "Authorization: Bearer $AIP_TOKEN" "$(node 2)/api/cluster" |
		python3 -c "import json, sys; sys.exit(sum(l['holder_alive'] for l in json.load(sys.stdin)['leases']) != 3)"
}
wait_for linked
echo "GET /api/cluster on node-2:"
curl -fsS -H "Authorization: Bearer $AIP_TOKEN" "$(node 2)/api/cluster" | python3 -c '
import json, sys
view = json.load(sys.stdin)
for n in view["nodes"]:
    print("%-8s epoch %d %-9s devices %s" % (n["id"], n["epoch"], n["state"], n.get("devices") or []))'

say "aipctl exec kiosk-N write_file through node-3 (a first call compiles the tool; each agent keeps it)"
for n in 1 2 3; do
	AIP_SERVER=$(node 3) "$BIN/aipctl" exec "kiosk-$n" write_file path=/demo/hello content="hello from node-3" --timeout 2m >/dev/null
	echo "kiosk-$n: $(cat "$WORK/files-$n/hello")"
done

say "a fleet through node-1 on every device labelled site=demo, one device at a time, 3 s each"
cat >"$WORK/plan.yaml" <<EOF
task_name: demo-cluster
steps:
  - {tool: write_file, parameters: {path: /demo/step-1, content: "ran\n", append: true}, timeout: 2m}
  - {tool: pause, parameters: {ms: 3000}, timeout: 2m}
  - {tool: write_file, parameters: {path: /demo/step-3, content: "ran\n", append: true}, timeout: 2m}
EOF
TASK=$(AIP_SERVER=$(node 1) "$BIN/aipctl" dispatch --label site=demo --concurrency 1 "$WORK/plan.yaml")
echo "fleet $TASK"
wait_for sh -c "cat '$WORK'/files-*/step-1 | grep -q ran"

say "kill -9 node-1, the fleet's node, while its first device runs the plan"
{ kill -KILL "${node_pid[1]}" && wait "${node_pid[1]}"; } 2>/dev/null || true
echo "the agents that were linked to node-1 link to their next server; an outbox keeps results until they are recorded"
echo "a survivor adopts the fleet and its devices' tasks within about 10 s (node-1's lease: a heartbeat every 2 s, dead after 6 s)"

say "aipctl task $TASK --wait, through node-3"
AIP_SERVER=$(node 3) "$BIN/aipctl" task "$TASK" --wait
for n in 1 2 3; do
	for step in 1 3; do
		lines=$(cat "$WORK/files-$n/step-$step" 2>/dev/null | wc -l)
		echo "kiosk-$n step $step ran $lines time(s)"
		[ "$lines" -eq 1 ]
	done
done
grep -h "adopted the sessions" "$WORK"/node-*.log | head -n 3
echo "demo-cluster ok: node-1 died, the fleet completed, each step ran once on each device"
