#!/bin/sh
# Builds the stock tools (read_file, write_file, list_dir, hash_file), or
# those named as arguments, each into NAME/NAME.wasm beside its source:
# compiled with clang and Debian's wasi-libc (apt-get install -y clang lld
# wasi-libc libclang-rt-14-dev-wasm32; clang finds /usr/include/wasm32-wasi
# and /usr/lib/wasm32-wasi by itself) in wasi-libc's reactor model, so that
# each exports _initialize and aip_call, the ABI's reactor form, with the
# code they share (stocklib); then each one's manifest NAME/NAME.json
# embedded with aipctl tool pack. OUT=DIR writes DIR/NAME.wasm instead.
# Sign one for a device with
#   aipctl tool sign --key KEY.key NAME.wasm
set -eu
cd "$(dirname "$0")"
out=${OUT:-}
[ -z "$out" ] || out=$(realpath "$out")
[ $# -gt 0 ] || set -- read_file write_file list_dir hash_file
for t in "$@"; do
	wasm=${out:-$t}/$t.wasm
	clang --target=wasm32-wasi -mexec-model=reactor -O2 -Wall -Wextra -Werror -Wl,--strip-all \
		-o "$wasm" "$t/$t.c" stocklib/*.c
	chmod 644 "$wasm" # a module is data, not a host executable
	go run ../../cmd/aipctl tool pack "$wasm" --manifest "$t/$t.json" >/dev/null
done
