;; env: writes its whole environment to stdout, each KEY=VALUE followed by
;; a NUL byte, as WASI's environ_get lays it out.
(module
  (import "wasi_snapshot_preview1" "environ_sizes_get" (func $sizes (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "environ_get" (func $get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  ;; count at 0, buffer size at 4, iovec at 8, pointers from 1024, strings from 4096.
  (func (export "_start")
    (drop (call $sizes (i32.const 0) (i32.const 4)))
    (drop (call $get (i32.const 1024) (i32.const 4096)))
    (i32.store (i32.const 8) (i32.const 4096))
    (i32.store (i32.const 12) (i32.load (i32.const 4)))
    (drop (call $fd_write (i32.const 1) (i32.const 8) (i32.const 1) (i32.const 16)))))
