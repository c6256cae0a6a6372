;; escape_dotdot: tries to create ../escaped.txt next to its granted dir
;; (the first preopen, fd 3) by calling path_open directly, as a C or Rust
;; tool could; a Go tool's runtime would clean the ".." away first. On
;; success it writes "escaped" there and exits 0; on failure it exits 1
;; without a word, so that only the host can say what happened.
(module
  (import "wasi_snapshot_preview1" "path_open"
    (func $path_open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))
  (memory (export "memory") 1)
  (data (i32.const 64) "../escaped.txt")
  (data (i32.const 96) "escaped")
  (func (export "_start")
    ;; fd 3, follow symlinks, path at 64 (14 bytes), O_CREAT, rights fd_read|fd_write, new fd at 0.
    (if (call $path_open (i32.const 3) (i32.const 1) (i32.const 64) (i32.const 14) (i32.const 1)
          (i64.const 0x42) (i64.const 0) (i32.const 0) (i32.const 0))
      (then (call $proc_exit (i32.const 1))))
    ;; iovec {96, 7} at 16, bytes written at 24.
    (i32.store (i32.const 16) (i32.const 96))
    (i32.store (i32.const 20) (i32.const 7))
    (drop (call $fd_write (i32.load (i32.const 0)) (i32.const 16) (i32.const 1) (i32.const 24)))))
