;; escape_symlink: makes a symbolic link "up" -> ".." inside its granted
;; dir (the first preopen, fd 3), then tries to create up/escaped.txt
;; through it. Both calls are legal WASI; only following the link on the
;; host would escape. On success it writes "escaped" there and exits 0; on
;; failure it exits 1 without a word, so that only the host can say what
;; happened.
(module
  (import "wasi_snapshot_preview1" "path_symlink" (func $path_symlink (param i32 i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_open"
    (func $path_open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))
  (memory (export "memory") 1)
  (data (i32.const 48) "..")
  (data (i32.const 56) "up")
  (data (i32.const 64) "up/escaped.txt")
  (data (i32.const 96) "escaped")
  (func (export "_start")
    ;; An existing "up" is fine: the open below is what matters.
    (drop (call $path_symlink (i32.const 48) (i32.const 2) (i32.const 3) (i32.const 56) (i32.const 2)))
    (if (call $path_open (i32.const 3) (i32.const 1) (i32.const 64) (i32.const 14) (i32.const 1)
          (i64.const 0x42) (i64.const 0) (i32.const 0) (i32.const 0))
      (then (call $proc_exit (i32.const 1))))
    (i32.store (i32.const 16) (i32.const 96))
    (i32.store (i32.const 20) (i32.const 7))
    (drop (call $fd_write (i32.load (i32.const 0)) (i32.const 16) (i32.const 1) (i32.const 24)))))
