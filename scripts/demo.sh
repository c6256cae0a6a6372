#!/usr/bin/env bash
# make demo: the whole system on loopback. It starts a server and an agent
# in a temp dir, enrolls the device, signs the stock tools with a fresh key
# the agent trusts (with the example tool in Go), runs list_tools, and
# hash_file (in C) and hash_file_go (in Go) on a file of its own, deploys
# the C example tool without a restart, shows a tampered module
# refused, dispatches a plan to the devices of a label and follows it live,
# rolls a tool out to them with a health check,
# shows some metrics, and stops both cleanly. Run on a terminal, it keeps
# them up for the dashboard until Enter.
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
	# The logs of what it started, if it started anything: a busy port
	# stops it before, with its own message.
	if [ "$status" -ne 0 ] && compgen -G "$WORK/*.log" >/dev/null; then
		echo "demo failed; logs:" >&2
		tail -n 20 "$WORK"/*.log >&2 || true
	fi
	rm -rf "$WORK"
	exit "$status"
}

# failed_for requires a step that failed to have failed for the reason it
# names: a timeout, say, is no proof that the sandbox refused.
failed_for() {
	if ! grep -q "$2" "$1"; then
		echo "it failed, but not for the reason it names ($3: \"$2\")" >&2
		exit 1
	fi
	echo "failed for the reason it names: $3"
}
trap stop EXIT INT TERM

# wait_for CMD...: retries CMD for up to 30 s, and gives up at once if the
# server or the agent has exited: it will not come.
wait_for() {
	for _ in $(seq 150); do
		"$@" >/dev/null 2>&1 && return 0
		for pid in $server_pid $agent_pid; do
			if ! kill -0 "$pid" 2>/dev/null; then
				echo "a process the demo started (pid $pid) exited" >&2
				return 1
			fi
		done
		sleep 0.2
	done
	echo "timed out waiting for: $*" >&2
	return 1
}

# A port that is taken fails the server at once; say so before starting
# anything, with what to do.
if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
	echo "port $PORT on 127.0.0.1 is in use: stop what listens there, or run make demo DEMO_PORT=another" >&2
	exit 1
fi

say "starting aip-server on 127.0.0.1:$PORT (data in $WORK/server)"
"$BIN/aip-server" --listen "127.0.0.1:$PORT" --data "$WORK/server" >"$WORK/server.log" 2>&1 &
server_pid=$!
wait_for test -s "$WORK/server/admin.token"
export AIP_TOKEN=$(cat "$WORK/server/admin.token")
wait_for "$BIN/aipctl" devices

say "aipctl device enroll kiosk-1"
"$BIN/aipctl" device enroll kiosk-1 --label site=demo --out "$WORK/kiosk-1.token"
echo "its token is shown once and stored only as a hash: --out writes it to a new file, mode 0600"

mkdir -p "$WORK/files"
echo "edgeaip demo: $(date -u +%FT%TZ)" >"$WORK/files/config.txt"

say "aipctl tool keygen, then sign the stock tools, and the example tool in Go"
"$BIN/aipctl" tool keygen --out "$WORK/demo"
mkdir -p "$WORK/tools"
for t in read_file write_file list_dir hash_file; do
	"$BIN/aipctl" tool sign --key "$WORK/demo.key" "$BIN/tools/$t.wasm" --out "$WORK/tools/$t.wasm"
done
"$BIN/aipctl" tool sign --key "$WORK/demo.key" "$BIN/examples/hash_file_go.wasm" --out "$WORK/tools/hash_file_go.wasm"
"$BIN/aipctl" tool inspect "$WORK/tools/hash_file.wasm" | sed -n '1,14p'

say "starting aip-agent for kiosk-1: signed stock tools, $WORK/files allowed, demo.pub trusted"
"$BIN/aip-agent" --server "ws://127.0.0.1:$PORT/ws" --id kiosk-1 --token-file "$WORK/kiosk-1.token" \
	--tools "stock=$WORK/tools" --allow-dir "$WORK/files" --trusted-key "$WORK/demo.pub" \
	--data "$WORK/agent" >"$WORK/agent.log" 2>&1 &
agent_pid=$!
wait_for sh -c "'$BIN/aipctl' devices -o json | grep -q '\"online\": true'"
"$BIN/aipctl" devices

say "aipctl exec kiosk-1 list_tools tool_type=data_collection"
"$BIN/aipctl" exec kiosk-1 list_tools tool_type=data_collection

say "aipctl exec kiosk-1 hash_file path=$WORK/files/config.txt"
echo "(hash_file, like every stock tool, is written in C: some 50 KB, compiled to machine code in milliseconds)"
"$BIN/aipctl" exec kiosk-1 hash_file path="$WORK/files/config.txt" | tee "$WORK/hash.json"
want=$(sha256sum "$WORK/files/config.txt" | cut -d' ' -f1)
grep -q "$want" "$WORK/hash.json"
echo "sha256 matches sha256sum: $want"

say "aipctl exec kiosk-1 hash_file_go path=$WORK/files/config.txt"
echo "(hash_file_go is the same tool written in Go, 3.7 MB:"
echo " its first call on a fresh data dir compiles it to machine code, which takes a few seconds;"
echo " the agent keeps the result in its data dir, so later calls start in milliseconds)"
"$BIN/aipctl" exec kiosk-1 hash_file_go path="$WORK/files/config.txt" | tee "$WORK/hash_go.json"
grep -q "$want" "$WORK/hash_go.json"
echo "sha256 matches sha256sum: $want"

say "aipctl exec kiosk-1 read_file path=/etc/passwd (outside the allowed dir: must fail)"
if "$BIN/aipctl" exec kiosk-1 read_file path=/etc/passwd >"$WORK/outside.txt" 2>&1; then
	cat "$WORK/outside.txt"
	echo "read outside the allowed dir succeeded" >&2
	exit 1
fi
cat "$WORK/outside.txt"
failed_for "$WORK/outside.txt" "not under a directory this tool was granted" "the sandbox's refusal"

say "aipctl tool deploy kiosk-1 dir_usage.wasm (a tool in C), signed; no restart"
"$BIN/aipctl" tool sign --key "$WORK/demo.key" "$BIN/tools/dir_usage.wasm" --out "$WORK/dir_usage.wasm"
"$BIN/aipctl" tool deploy kiosk-1 "$WORK/dir_usage.wasm" >"$WORK/deploy.json"
grep -q '"status": "success"' "$WORK/deploy.json"
"$BIN/aipctl" exec kiosk-1 dir_usage path="$WORK/files"

say "aipctl tool deploy kiosk-1 tampered.wasm (one byte changed after signing: must be refused)"
cp "$WORK/dir_usage.wasm" "$WORK/tampered.wasm"
printf 'X' | dd of="$WORK/tampered.wasm" bs=1 seek=200 conv=notrunc status=none
if "$BIN/aipctl" tool deploy kiosk-1 "$WORK/tampered.wasm" >"$WORK/tampered.txt" 2>&1; then
	cat "$WORK/tampered.txt"
	echo "a tampered module was installed" >&2
	exit 1
fi
cat "$WORK/tampered.txt"
failed_for "$WORK/tampered.txt" "signature does not match the module" "the signature check"

say "aipctl dispatch --label site=demo plan.yaml --wait (every device labelled site=demo, followed live)"
cat >"$WORK/plan.yaml" <<EOF
task_name: demo-check
steps:
  - tool: stock.hash_file
    parameters: {path: $WORK/files/config.txt}
  - tool: stock.list_dir
    parameters: {path: $WORK/files}
EOF
"$BIN/aipctl" dispatch --label site=demo "$WORK/plan.yaml" --wait
"$BIN/aipctl" tasks --limit 4

say "aipctl rollout apply: every site=demo device keeps disk_usage (dir_usage packed under another name), in waves, with a health check"
sed 's/"name": *"dir_usage"/"name": "disk_usage"/' wasmtools/examples/c/dir_usage/dir_usage.json >"$WORK/disk_usage.json"
"$BIN/aipctl" tool pack "$BIN/tools/dir_usage.wasm" --manifest "$WORK/disk_usage.json" --out "$WORK/disk_usage.packed.wasm" >/dev/null
"$BIN/aipctl" tool sign --key "$WORK/demo.key" "$WORK/disk_usage.packed.wasm" --out "$WORK/disk_usage.wasm" >/dev/null
cat >"$WORK/kiosk-tools.yaml" <<EOF
name: kiosk-tools
selector: {site: demo}
tools: [disk_usage.wasm]
health:
  - tool: disk_usage
    parameters: {path: $WORK/files}
waves: [1, 100%]
on_failure: rollback
device_timeout: 1m
EOF
"$BIN/aipctl" rollout apply "$WORK/kiosk-tools.yaml"
"$BIN/aipctl" rollout status kiosk-tools --watch >"$WORK/rollout.txt"
tail -n 6 "$WORK/rollout.txt"
grep -q "rollout kiosk-tools: done" "$WORK/rollout.txt"

if command -v curl >/dev/null; then
	say "GET /metrics (Prometheus text format, with the operator token)"
	curl -fsS -H "Authorization: Bearer $AIP_TOKEN" "$AIP_SERVER/metrics" |
		grep -E '^edgeaip_(devices_connected|commands_total|sessions_ended_total|tool_fuel_total|websocket_frames_total|rollout_devices)'
fi
if [ -t 0 ] && [ -t 1 ]; then
	say "the dashboard: $AIP_SERVER/"
	echo "log in with the operator token: $AIP_TOKEN"
	echo "aipctl works too, in another shell: export AIP_SERVER=$AIP_SERVER AIP_TOKEN=$AIP_TOKEN"
	read -r -p "press Enter to stop the server and the agent " _ || true
else
	echo "the dashboard is at $AIP_SERVER/ while the demo runs (run make demo on a terminal to keep it up until Enter)"
fi

say "stopping agent and server"
# Both exit 0 on SIGTERM once they have shut down cleanly; anything else
# fails the demo.
kill -TERM "$agent_pid"; wait "$agent_pid"; agent_pid=
kill -TERM "$server_pid"; wait "$server_pid"; server_pid=
echo "demo ok"
