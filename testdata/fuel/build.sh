#!/bin/sh
# Rebuilds every fuel-metering fixture from its source, with the exact
# commands used for the committed .wasm files. The tests read only the
# committed .wasm files, so they need none of these tools.
#
# Tools (Debian packages): wabt (wat2wasm), clang, lld, wasi-libc,
# libclang-rt-14-dev-wasm32, and Go >= 1.26.
set -eu
cd "$(dirname "$0")"

# Hand-written modules. --debug-names keeps a name section, so the tests
# also cover its rewriting.
for wat in *.wat; do
	wat2wasm --debug-names "$wat" -o "${wat%.wat}.wasm"
done

# Modules Instrument must reject, built with every wabt feature on.
for wat in reject/*.wat; do
	wat2wasm --enable-all "$wat" -o "${wat%.wat}.wasm"
done

# C programs against Debian's wasi-libc, with the post-MVP features clang
# and Rust enable by default in newer releases.
for c in coremark matmul sieve fib stride; do
	clang --target=wasm32-wasi -O2 -mbulk-memory -msign-ext -mnontrapping-fptoint \
		-o "$c.wasm" "$c.c"
done

# Real Go programs: a mixed workload, and workloads of the standard
# library for the benchmark suite.
for p in goprog gostd; do
	(cd $p && GOOS=wasip1 GOARCH=wasm go build -trimpath -buildvcs=false -o $p.wasm .)
done
