;; initio: a reactor whose initialization does what a snapshot cannot
;; keep: it reads stdin (where a call's parameters will be), opens a file
;; in its first preopened dir (whose content would be frozen) and writes
;; to stdout (which no call would return).
(module
  (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_open"
    (func $path_open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 64) "config.json")
  (data (i32.const 96) "ready\n")
  (func (export "_initialize")
    (i32.store (i32.const 0) (i32.const 128))
    (i32.store (i32.const 4) (i32.const 16))
    (drop (call $fd_read (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 8)))
    (drop (call $path_open (i32.const 3) (i32.const 0) (i32.const 64) (i32.const 11) (i32.const 0)
      (i64.const 0x2) (i64.const 0) (i32.const 0) (i32.const 8)))
    (i32.store (i32.const 0) (i32.const 96))
    (i32.store (i32.const 4) (i32.const 6))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8))))
  (func (export "aip_call") (result i32) (i32.const 0)))
