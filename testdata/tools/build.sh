#!/bin/sh
# Rebuilds the tool fixtures:
#  - the hostile and tiny tools, from their .wat sources, with wat2wasm from
#    Debian's wabt package (apt-get install -y wabt): commands here, and
#    reactors (the form started from a snapshot) in reactor/;
#  - reactor/: also some of the commands in the reactor form, made from the
#    same .wat by reactor() below, for the tests that run a tool both ways;
#  - the tools written in C (symlinks.c), with clang and Debian's wasi-libc
#    (apt-get install -y clang lld wasi-libc libclang-rt-14-dev-wasm32);
#  - invalid/: modules only instrumenting refuses, likewise, then packed and
#    signed with test.key as signed_echo is;
#  - signed/: echo.wasm packed with each manifest of signed/manifests, then
#    signed with the test keys of ../keys (aipctl tool, via go run):
#      signed_echo    signed with test.key (trusted by the tests)
#      unsigned_echo  not signed
#      foreign_echo   signed with other.key (trusted by no test)
#      tampered_echo  signed with test.key, then one byte of its manifest
#                     changed ("copies" -> "Copies")
# ed25519 signatures are deterministic, so a rebuild gives the same bytes.
set -eu
cd "$(dirname "$0")"
for w in *.wat reactor/*.wat; do
	wat2wasm "$w" -o "${w%.wat}.wasm"
done
for c in *.c; do
	clang --target=wasm32-wasi -O2 -Wall -Wextra -Wl,--strip-all -o "${c%.c}.wasm" "$c"
	chmod 644 "${c%.c}.wasm" # a module is data, not a host executable
done

# reactor NAME: NAME.wat as a reactor. Its _start becomes a function that
# aip_call calls, returning status 0 unless it exits first, and an empty
# _initialize is added. Every command .wat exports _start as (func
# (export "_start") ...) and ends with the module's closing parenthesis.
reactor() {
	sed -e 's/(func (export "_start")/(func $aip_main/' -e '$ s/)$//' "$1.wat"
	echo '  (func (export "_initialize"))'
	echo '  (func (export "aip_call") (result i32) (call $aip_main) (i32.const 0)))'
}
for n in echo escape_dotdot escape_symlink flood errflood; do
	reactor "$n" | wat2wasm - -o "reactor/$n.wasm"
done
# regions/: tools of the sandbox's region tests, out of the dir the agent
# tests load whole; scribble in the reactor form too.
for w in regions/*.wat; do
	wat2wasm "$w" -o "${w%.wat}.wasm"
done
(cd regions && reactor scribble | wat2wasm - -o reactor/scribble.wasm)
# invalid/: modules that pass the agent's checks but not wazero's
# validation, which wat2wasm would refuse to build; they are packed with
# their manifest of invalid/manifests and signed with test.key, below.
for w in invalid/*.wat; do
	wat2wasm --no-check "$w" -o "${w%.wat}.wasm"
done

aipctl="go run ../../cmd/aipctl"
for n in signed_echo unsigned_echo tampered_echo foreign_echo; do
	$aipctl tool pack echo.wasm --manifest "signed/manifests/$n.json" --out "signed/$n.wasm" >/dev/null
done
$aipctl tool sign --key ../keys/test.key signed/signed_echo.wasm >/dev/null
$aipctl tool sign --key ../keys/other.key signed/foreign_echo.wasm >/dev/null
$aipctl tool sign --key ../keys/test.key signed/tampered_echo.wasm >/dev/null
off=$(grep -obUa 'copies stdin' signed/tampered_echo.wasm | cut -d: -f1)
printf 'C' | dd of=signed/tampered_echo.wasm bs=1 seek="$off" conv=notrunc status=none
for w in invalid/*.wat; do
	n=$(basename "${w%.wat}")
	$aipctl tool pack "invalid/$n.wasm" --manifest "invalid/manifests/$n.json" --out "invalid/$n.wasm" >/dev/null
	$aipctl tool sign --key ../keys/test.key "invalid/$n.wasm" >/dev/null
done
