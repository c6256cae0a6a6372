;; A guest that never stops on its own: a WASI command whose _start says
;; "spinning" on stdout, so a test knows it has started, then loops
;; forever. Used to test deadlines, cancellation and the garbage collector.
(module
  (import "wasi_snapshot_preview1" "fd_write"
    (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "spinning\n")
  (func (export "_start")
    (local $i i32)
    ;; iovec at 0: base 16, length 9; bytes written go to 8.
    (i32.store (i32.const 0) (i32.const 16))
    (i32.store (i32.const 4) (i32.const 9))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))
    (loop $forever
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br $forever))))
