;; counter: counts its runs in a global and in memory, and prints both.
;; A fresh instance per call prints "1 1" every time.
(module
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (global $runs (mut i32) (i32.const 0))
  (func (export "_start")
    (global.set $runs (i32.add (global.get $runs) (i32.const 1)))
    (i32.store (i32.const 100) (i32.add (i32.load (i32.const 100)) (i32.const 1)))
    ;; "G M" at 16, as digits: runs of at most 9 show.
    (i32.store8 (i32.const 16) (i32.add (i32.const 48) (global.get $runs)))
    (i32.store8 (i32.const 17) (i32.const 32))
    (i32.store8 (i32.const 18) (i32.add (i32.const 48) (i32.load (i32.const 100))))
    (i32.store (i32.const 0) (i32.const 16))
    (i32.store (i32.const 4) (i32.const 3))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))))
