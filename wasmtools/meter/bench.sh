#!/bin/sh
# Runs the fuel-metering CPU suite (BenchmarkFuel) on wazero's compiler and
# prints, per program, the median time unmetered, metered and under
# WithCloseOnContextDone, the ratios metered/unmetered and
# closeOnContextDone/unmetered, and their geometric means. `make bench-fuel`
# calls it.
#
# Usage: wasmtools/meter/bench.sh [rounds]       (default 8)
#   BENCHTIME=2s wasmtools/meter/bench.sh 20      (go test -benchtime)
#   SUITE=DIR wasmtools/meter/bench.sh            (add the programs DIR/suite.txt lists)
#   CCD=0 wasmtools/meter/bench.sh                (skip WithCloseOnContextDone)
#
# Each round is one `go test -count 1` of the whole suite, so that every
# variant of every program runs once per round and a ratio pairs samples
# taken close in time (go test -count N would run each sub-benchmark N
# times in a row instead). With CCD=0 and BENCHTIME=1x, a round of the 46
# programs of issue 25's suite (SUITE, BENCHMARKS.md) took 3.5 minutes at
# load average 5.
#
# The raw go test output is kept in $OUT (default: a temporary file) for
# benchstat, which is run too when it is installed:
#   go install golang.org/x/perf/cmd/benchstat@latest
#
# Wall-clock figures need a quiet machine: run nothing else meanwhile.
set -eu
rounds=${1:-8}
out=${OUT:-$(mktemp)}
case $out in /*) ;; *) out=$PWD/$out ;; esac
suite=${SUITE:-}
case $suite in /* | "") ;; *) suite=$PWD/$suite ;; esac
ccd=true
[ "${CCD:-1}" = 0 ] && ccd=false
cd "$(dirname "$0")/../.."
: >"$out"
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
go test -c -o "$bin/meter.test" ./wasmtools/meter/
i=0
while [ "$i" -lt "$rounds" ]; do
	# The test binary reads its fixtures relative to its package directory.
	(cd wasmtools/meter && "$bin/meter.test" -test.run '^$' -test.bench '^BenchmarkFuel$' \
		-test.benchtime "${BENCHTIME:-1s}" -test.count 1 -fuel.suite "$suite" -fuel.ccd="$ccd") >>"$out"
	i=$((i + 1))
done
go run ./wasmtools/meter/internal/benchratio <"$out"
echo "raw results: $out"
if command -v benchstat >/dev/null 2>&1; then
	benchstat -col /variant "$out"
fi
