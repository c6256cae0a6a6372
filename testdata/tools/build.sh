#!/bin/sh
# Rebuilds the hostile and tiny tool fixtures from their .wat sources.
# Needs wat2wasm from Debian's wabt package (apt-get install -y wabt).
set -eu
cd "$(dirname "$0")"
for w in *.wat; do
	wat2wasm "$w" -o "${w%.wat}.wasm"
done
