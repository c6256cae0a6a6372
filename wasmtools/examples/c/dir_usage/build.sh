#!/bin/sh
# Builds dir_usage.wasm (or the path given as $1): compiled with clang and
# Debian's wasi-libc (apt-get install -y clang lld wasi-libc
# libclang-rt-14-dev-wasm32; clang finds /usr/include/wasm32-wasi and
# /usr/lib/wasm32-wasi by itself) in wasi-libc's reactor model, so that it
# exports _initialize and aip_call, the ABI's reactor form; then the
# manifest embedded with aipctl tool pack. Sign it for a device with
#   aipctl tool sign --key KEY.key dir_usage.wasm
set -eu
out=$(realpath "${1:-$(dirname "$0")/dir_usage.wasm}")
cd "$(dirname "$0")"
clang --target=wasm32-wasi -mexec-model=reactor -O2 -Wall -Wextra -Wl,--strip-all -o "$out" dir_usage.c
chmod 644 "$out" # a module is data, not a host executable
go run ../../../../cmd/aipctl tool pack "$out" --manifest dir_usage.json
