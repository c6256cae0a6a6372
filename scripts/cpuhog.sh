#!/bin/sh
# Runs a command while a CPU hog keeps the machine's cores busy, to show
# whether a test suite holds on a loaded machine: make test-under-load.
#
#   scripts/cpuhog.sh [COMMAND ARGS...]
#
# HOG_LOOPS busy loops (default 2: this machine's two cores) run at normal
# priority beside the command. Each stops after HOG_SECONDS (default 3600)
# even if this script is killed with SIGKILL, and all stop as soon as the
# command ends. The script exits with the command's status.
set -u
loops=${HOG_LOOPS:-2}
limit=${HOG_SECONDS:-3600}
pids=
stop() { [ -n "$pids" ] && kill $pids 2>/dev/null; pids=; }
trap stop EXIT
trap 'stop; exit 130' INT
trap 'stop; exit 143' TERM
i=0
while [ "$i" -lt "$loops" ]; do
	timeout "$limit" sh -c 'while :; do :; done' &
	pids="$pids $!"
	i=$((i + 1))
done
echo "cpuhog: $loops busy loops for at most ${limit}s: $*" >&2
"$@"
