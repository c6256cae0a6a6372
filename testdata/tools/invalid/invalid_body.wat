;; A WASI command whose one function does not validate: it leaves an i32 on
;; the stack of a function that returns nothing. Everything the agent checks
;; before instrumenting (signature, manifest, the _start export, the memory
;; size) passes; wazero's validation, which instrumenting runs, refuses it.
;; ../build.sh builds it with `wat2wasm --no-check`, then packs and signs it.
(module
  (memory (export "memory") 1)
  (func (export "_start")
    i32.const 1))
