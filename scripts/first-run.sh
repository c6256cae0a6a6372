#!/usr/bin/env bash
# scripts/first-run.sh: what an agent on a fresh data dir costs, as a new
# kiosk meets it (issue 38); BENCHMARKS.md records what it prints.
#
#   first-run.sh calls     RUNS times, a fresh agent data dir with the stock
#                          tools and dir_usage: the first call of each, timed
#                          with aipctl's own start, in an order that turns
#                          with each run; then the median of each tool. In
#                          brackets, what the call spent in the agent, from
#                          its log ("command received" to "action done").
#   first-run.sh cold      the same, but each tool's call is the only one
#                          of a fresh agent, sent as the agent starts
#                          (--wait-for-device): what a call costs whose
#                          tool nothing prepared before; the time counts
#                          the agent's start too.
#                          EXTRA= more .wasm files to load and call too.
#   first-run.sh memory    one fresh agent with the stock tools only (EXTRA=
#                          more .wasm files to load beside them): the first
#                          call of each (none with CALLS=0), then the agent's
#                          VmHWM over its first minute and its VmRSS at 60 s,
#                          from /proc.
#
# BIN (default bin) holds aip-server, aipctl and tools/ (make build);
# AGENT (default BIN/aip-agent) is the agent to run; RUNS defaults to 5.
# For calls and cold, AGENTS="NAME=PATH NAME=PATH" runs each of several agents in
# turn in every run, to compare them side by side under the same load;
# KEEP=DIR keeps the agents' logs there. Everything runs on loopback, in
# a temp dir it removes.
set -euo pipefail

BIN=${BIN:-bin}
AGENT=${AGENT:-$BIN/aip-agent}
RUNS=${RUNS:-5}
PORT=${PORT:-8790}
WORK=$(mktemp -d -t edgeaip-first-run-XXXXXX)
export AIP_SERVER="http://127.0.0.1:$PORT"
server_pid= agent_pid=

stop() {
	[ -n "$agent_pid" ] && kill -TERM "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null || true
	[ -n "$server_pid" ] && kill -TERM "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
	if [ -n "${KEEP:-}" ]; then
		mkdir -p "$KEEP"
		cp "$WORK"/*.log "$KEEP"/ 2>/dev/null || true
	fi
	rm -rf "$WORK"
}
trap stop EXIT INT TERM

wait_for() {
	for _ in $(seq 300); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	echo "timed out waiting for: $*" >&2
	return 1
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }

start_server() {
	"$BIN/aip-server" --listen "127.0.0.1:$PORT" --data "$WORK/server" >"$WORK/server.log" 2>&1 &
	server_pid=$!
	wait_for test -s "$WORK/server/admin.token"
	export AIP_TOKEN=$(cat "$WORK/server/admin.token")
	wait_for "$BIN/aipctl" devices
	mkdir -p "$WORK/files/dir"
	echo "kiosk config" >"$WORK/files/config.txt"
}

# start_agent ID TOOL...: a fresh agent ID, on a fresh data dir, loading
# the tools named from BIN/tools (or paths); with WAIT=0 it does not wait
# for the agent to be online.
start_agent() {
	local id=$1 tools="$WORK/$1-tools"
	shift
	mkdir -p "$tools"
	for t in "$@"; do
		case $t in */*) cp "$t" "$tools/" ;; *) cp "$BIN/tools/$t.wasm" "$tools/" ;; esac
	done
	"$BIN/aipctl" device enroll "$id" >"$WORK/$id.token"
	agent_start=$(now_ms)
	"$AGENT" --server "ws://127.0.0.1:$PORT/ws" --id "$id" --token-file "$WORK/$id.token" \
		--tools "stock=$tools" --allow-dir "$WORK/files" --data "$WORK/$id-data" >"$WORK/$id.log" 2>&1 &
	agent_pid=$!
	[ "${WAIT:-1}" = 0 ] || wait_for sh -c "'$BIN/aipctl' devices -o json | grep -A3 '\"$id\"' | grep -q '\"online\": true'"
}

stop_agent() {
	kill -TERM "$agent_pid" && wait "$agent_pid" || true
	agent_pid=
}

# params TOOL: the parameters of its first call.
params() {
	case $1 in
	write_file) echo "path=$WORK/files/out.txt content=hello" ;;
	list_dir | dir_usage) echo "path=$WORK/files" ;;
	*) echo "path=$WORK/files/config.txt" ;;
	esac
}

# exec_ms ID TOOL: runs TOOL's call, and prints how long aipctl took.
exec_ms() {
	local start
	start=$(now_ms)
	# shellcheck disable=SC2046
	"$BIN/aipctl" exec "$1" "$2" $(params "$2") ${EXEC_FLAGS:-} >"$WORK/out.json" || { cat "$WORK/out.json" >&2; return 1; }
	echo $(($(now_ms) - start))
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

# agent_ms ID: what the last call of agent ID spent in it, from its log:
# "command received" to "action done", in milliseconds.
agent_ms() {
	awk '/msg="command received"/ {r = $1} /msg="action done"/ {d = $1}
		function ms(t) { split(substr(t, 17, 12), a, ":"); return (a[1] * 3600 + a[2] * 60 + a[3]) * 1000 }
		END {printf "%d", ms(d) - ms(r) + 0.5}' "$WORK/$1.log"
}

# first_calls LABEL TOOL...: a fresh agent (named by the agent's name and
# LABEL), and the first call of each TOOL in turn; each goes to calls.txt.
first_calls() {
	started=$((${started:-0} + 1))
	local id="calls-$started" line="$1${name:+ ($name)}:"
	shift
	# shellcheck disable=SC2086
	start_agent "$id" dir_usage read_file write_file list_dir hash_file ${EXTRA:-}
	for t in "$@"; do
		ms=$(exec_ms "$id" "$t")
		in=$(agent_ms "$id")
		echo "$name $t $ms $in" >>"$WORK/calls.txt"
		line="$line $t ${ms}ms ($in)"
	done
	echo "$line"
	stop_agent
}

# each_agent FN ARGS...: FN ARGS for each agent of AGENTS (or AGENT), with
# name and AGENT set.
each_agent() {
	local a
	for a in ${AGENTS:-"=$AGENT"}; do
		name=${a%%=*} AGENT=${a#*=}
		"$@"
	done
}

# called_tools: the tools calls and cold call, the stock tools, dir_usage
# and those of EXTRA, by name.
called_tools() {
	echo dir_usage read_file write_file list_dir hash_file
	for t in ${EXTRA:-}; do basename "$t" .wasm; done
}

calls() {
	local tools order n
	read -ra tools <<<"$(called_tools | xargs)"
	n=${#tools[@]}
	for run in $(seq "$RUNS"); do
		order=()
		for i in $(seq 0 $((n - 1))); do order+=("${tools[$(((i + run) % n))]}"); done
		each_agent first_calls "run $run" "${order[@]}"
	done
	each_agent medians "${tools[@]}"
}

cold() {
	local tools
	read -ra tools <<<"$(called_tools | xargs)"
	for run in $(seq "$RUNS"); do
		for t in "${tools[@]}"; do
			WAIT=0 EXEC_FLAGS=--wait-for-device each_agent first_calls "run $run, $t" "$t"
		done
	done
	each_agent medians "${tools[@]}"
}

# medians TOOL...: the median of the agent's calls of each TOOL.
medians() {
	echo
	echo "| tool | first call${name:+ ($name)}, median of $RUNS (ms) | of it in the agent |"
	echo "|---|---|---|"
	for t in "$@"; do
		echo "| $t | $(grep "^$name $t " "$WORK/calls.txt" | cut -d' ' -f3 | median) | $(grep "^$name $t " "$WORK/calls.txt" | cut -d' ' -f4 | median) |"
	done
}

memory() {
	local tools=(read_file write_file list_dir hash_file)
	# shellcheck disable=SC2086
	start_agent mem-1 "${tools[@]}" ${EXTRA:-}
	if [ "${CALLS:-1}" != 0 ]; then
		for t in "${tools[@]}" ${EXTRA:-}; do
			t=$(basename "$t" .wasm)
			echo "$t first call: $(exec_ms mem-1 "$t") ms"
		done
	fi
	sleep $(((60999 - ($(now_ms) - agent_start)) / 1000))
	echo "at $(($(now_ms) - agent_start)) ms since the agent started:"
	grep -E '^(VmHWM|VmRSS)' "/proc/$agent_pid/status"
	stop_agent
}

start_server
case ${1:-} in
calls) calls ;;
cold) cold ;;
memory) memory ;;
*)
	echo "usage: $0 calls|cold|memory" >&2
	exit 2
	;;
esac
