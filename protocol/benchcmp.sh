#!/bin/sh
# Compares the CBOR fast path of this tree with that of an earlier commit,
# message shape by message shape (BenchmarkFastPath, encode and decode):
#
#   - instructions per op, counted by valgrind's callgrind: the whole
#     run at N and at 2N ops, the difference over N, so that start-up and
#     set-up cancel out; with the collector off and one P, so that the
#     count depends neither on other work on the machine nor on when the
#     collector runs (it still varies by about 2 % from run to run: free-
#     form maps are iterated, and so sorted, in random order);
#   - wall-clock ns/op, B/op and allocs/op, the old and the new binary run
#     back to back for each shape, which goes first alternating by round,
#     for benchstat.
#
# Usage: protocol/benchcmp.sh OLD_REV [rounds]    (default 10 rounds)
#   BENCHTIME=200ms protocol/benchcmp.sh ...      (go test -benchtime, 100ms)
#   ITERS=3000 protocol/benchcmp.sh ...           (N, ops counted by callgrind)
# OLD_REV must have BenchmarkFastPath; it is exported with git archive,
# nothing is checked out. The results stay in $OUT (default: a temporary
# directory): old.txt and new.txt for benchstat, old.ir and new.ir.
# Without valgrind the instruction counts are skipped.
set -eu
old_rev=$1
rounds=${2:-10}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
case $out in /*) ;; *) out=$PWD/$out ;; esac
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/old"
git archive "$old_rev" | tar -x -C "$tmp/old"
(cd "$tmp/old" && go test -c -o "$tmp/old.test" ./protocol)
go test -c -o "$tmp/new.test" ./protocol
old_dir=$tmp/old/protocol
new_dir=$PWD/protocol

# bench SIDE PATTERN [ARGS...] runs one side's binary from its package
# directory, where its golden frames are; under $RUNNER when it is set.
bench() {
	side=$1 pattern=$2
	shift 2
	dir=$old_dir
	[ "$side" = new ] && dir=$new_dir
	(cd "$dir" && ${RUNNER:-} "$tmp/$side.test" -test.run '^$' -test.bench "$pattern" "$@")
}

# Each sub-benchmark's name, and the pattern that selects it alone.
names=$(bench new '^BenchmarkFastPath$' -test.benchtime 1x | awk '/^BenchmarkFastPath/ { sub(/-[0-9]+$/, "", $1); print $1 }')
pattern() { echo "$1" | sed 's|/|$/^|g; s|^|^|; s|$|$|'; }

# instructions SIDE PATTERN OPS counts what a run of OPS ops executes.
instructions() {
	GOGC=off GOMAXPROCS=1 GODEBUG=asyncpreemptoff=1 \
		RUNNER="valgrind --tool=callgrind --callgrind-out-file=/dev/null" \
		bench "$1" "$2" -test.benchtime "$3x" 2>&1 | awk '/Collected :/ { print $4 }'
}

if command -v valgrind >/dev/null 2>&1; then
	iters=${ITERS:-3000}
	: >"$out/old.ir"
	: >"$out/new.ir"
	for name in $names; do
		for side in old new; do
			once=$(instructions "$side" "$(pattern "$name")" "$iters")
			twice=$(instructions "$side" "$(pattern "$name")" $((2 * iters)))
			echo "$name $(((twice - once) / iters))" >>"$out/$side.ir"
		done
	done
	echo "instructions per op (callgrind, $iters ops more, GOGC=off):"
	paste -d ' ' "$out/old.ir" "$out/new.ir" | awk '{
		d = log($4 / $2); s += d; n++
		printf "%-58s %8d %8d %+6.1f %%\n", $1, $2, $4, 100 * ($4 - $2) / $2
	} END { printf "%-58s %17s %+6.1f %%\n", "geomean", "", 100 * (exp(s / n) - 1) }'
fi

: >"$out/old.txt"
: >"$out/new.txt"
round=1
while [ "$round" -le "$rounds" ]; do
	for name in $names; do
		first=old second=new
		[ $((round % 2)) = 0 ] && first=new second=old
		for side in $first $second; do
			bench "$side" "$(pattern "$name")" -test.benchtime "${BENCHTIME:-100ms}" -test.benchmem |
				grep '^Benchmark' >>"$out/$side.txt"
		done
	done
	round=$((round + 1))
done
echo "results: $out"
if command -v benchstat >/dev/null 2>&1; then
	benchstat "$out/old.txt" "$out/new.txt"
fi
