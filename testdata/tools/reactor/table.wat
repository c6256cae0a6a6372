;; table: a reactor that sets a table entry at run time, which a
;; snapshot of memory would lose: the meter cannot put it in the snapshot
;; form. Its call prints "ok" through the entry it set.
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (table $t 1 funcref)
  (data (i32.const 16) "ok")
  (func $print
    (i32.store (i32.const 0) (i32.const 16))
    (i32.store (i32.const 4) (i32.const 2))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8))))
  (elem declare func $print)
  (func (export "aip_call") (result i32)
    (table.set $t (i32.const 0) (ref.func $print))
    (call_indirect (i32.const 0))
    (i32.const 0)))
