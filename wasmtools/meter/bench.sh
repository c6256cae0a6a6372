#!/bin/sh
# Runs the fuel-metering CPU suite (BenchmarkFuel) on wazero's compiler and
# prints, per program, the median time unmetered, metered and under
# WithCloseOnContextDone, the ratios metered/unmetered and
# closeOnContextDone/unmetered, and their geometric means. `make bench-fuel`
# calls it.
#
# Usage: wasmtools/meter/bench.sh [count]        (default 10)
#   BENCHTIME=2s wasmtools/meter/bench.sh 20      (go test -benchtime)
#
# The raw go test output is kept in $OUT (default: a temporary file) for
# benchstat, which is run too when it is installed:
#   go install golang.org/x/perf/cmd/benchstat@latest
#
# Wall-clock figures need a quiet machine: run nothing else meanwhile.
set -eu
cd "$(dirname "$0")/../.."
count=${1:-10}
out=${OUT:-$(mktemp)}
go test -run '^$' -bench '^BenchmarkFuel$' -benchtime "${BENCHTIME:-1s}" -count "$count" \
	./wasmtools/meter/ >"$out"
go run ./wasmtools/meter/internal/benchratio <"$out"
echo "raw results: $out"
if command -v benchstat >/dev/null 2>&1; then
	benchstat -col /variant "$out"
fi
