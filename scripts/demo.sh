#!/usr/bin/env bash
# make demo: the whole system on loopback. It starts a server and an agent
# in a temp dir, enrolls the device, runs list_tools and hash_file on a file
# of its own, prints the results, and stops both cleanly.
set -euo pipefail

BIN=${BIN:-bin}
PORT=${DEMO_PORT:-8700}
WORK=$(mktemp -d -t edgeaip-demo-XXXXXX)
export AIP_SERVER="http://127.0.0.1:$PORT"
server_pid= agent_pid=

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

stop() {
	local status=$?
	[ -n "$agent_pid" ] && kill -TERM "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null || true
	[ -n "$server_pid" ] && kill -TERM "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
	if [ "$status" -ne 0 ]; then
		echo "demo failed; logs:" >&2
		tail -n 20 "$WORK"/*.log >&2 || true
	fi
	rm -rf "$WORK"
	exit "$status"
}
trap stop EXIT INT TERM

# wait_for CMD...: retries CMD for up to 30 s.
wait_for() {
	for _ in $(seq 150); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.2
	done
	echo "timed out waiting for: $*" >&2
	return 1
}

say "starting aip-server on 127.0.0.1:$PORT (data in $WORK/server)"
"$BIN/aip-server" --listen "127.0.0.1:$PORT" --data "$WORK/server" >"$WORK/server.log" 2>&1 &
server_pid=$!
wait_for test -s "$WORK/server/admin.token"
export AIP_TOKEN=$(cat "$WORK/server/admin.token")
wait_for "$BIN/aipctl" devices

say "aipctl device enroll kiosk-1"
"$BIN/aipctl" device enroll kiosk-1 --label site=demo >"$WORK/kiosk-1.token"
echo "token written to kiosk-1.token (shown once, stored only as a hash)"

mkdir -p "$WORK/files"
echo "edgeaip demo: $(date -u +%FT%TZ)" >"$WORK/files/config.txt"

say "starting aip-agent for kiosk-1 with the stock tools and $WORK/files allowed"
"$BIN/aip-agent" --server "ws://127.0.0.1:$PORT/ws" --id kiosk-1 --token-file "$WORK/kiosk-1.token" \
	--tools "$BIN/tools" --allow-dir "$WORK/files" --data "$WORK/agent" >"$WORK/agent.log" 2>&1 &
agent_pid=$!
wait_for sh -c "'$BIN/aipctl' devices -o json | grep -q '\"online\": true'"
"$BIN/aipctl" devices

say "aipctl exec kiosk-1 list_tools tool_type=data_collection"
"$BIN/aipctl" exec kiosk-1 list_tools tool_type=data_collection

say "aipctl exec kiosk-1 hash_file path=$WORK/files/config.txt"
"$BIN/aipctl" exec kiosk-1 hash_file path="$WORK/files/config.txt" | tee "$WORK/hash.json"
want=$(sha256sum "$WORK/files/config.txt" | cut -d' ' -f1)
grep -q "$want" "$WORK/hash.json"
echo "sha256 matches sha256sum: $want"

say "aipctl exec kiosk-1 read_file path=/etc/passwd (outside the allowed dir: must fail)"
if "$BIN/aipctl" exec kiosk-1 read_file path=/etc/passwd; then
	echo "read outside the allowed dir succeeded" >&2
	exit 1
fi

say "stopping agent and server"
kill -TERM "$agent_pid"; wait "$agent_pid" || true; agent_pid=
kill -TERM "$server_pid"; wait "$server_pid"; server_pid=
echo "demo ok"
