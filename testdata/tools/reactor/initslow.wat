;; initslow: a reactor whose initialization takes seconds of plain work
;; (six billion turns of a loop, some fifty billion units of fuel),
;; for the tests of a tool whose preparation outlasts a command's
;; timeout. Each call then prints {"ready":true}.
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (global $turns (mut i64) (i64.const 0))
  (data (i32.const 200) "{\"ready\":true}")
  (func (export "_initialize")
    (local $i i64)
    (loop $work
      (local.set $i (i64.add (local.get $i) (i64.const 1)))
      (br_if $work (i64.lt_u (local.get $i) (i64.const 6000000000))))
    (global.set $turns (local.get $i)))
  (func (export "aip_call") (result i32)
    (i32.store (i32.const 104) (i32.const 200))
    (i32.store (i32.const 108) (i32.const 14))
    (drop (call $fd_write (i32.const 1) (i32.const 104) (i32.const 1) (i32.const 112)))
    (i32.const 0)))
