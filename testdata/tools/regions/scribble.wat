;; scribble: grows its memory as far as the sandbox lets it, exits 99 if any
;; byte of it is not zero (something an earlier call wrote), then fills all
;; of it and ends as the first byte of stdin says: 0 returns, 1 exits 3,
;; 2 traps, 3 spins until stopped.
(module
  (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))
  (memory (export "memory") 1)
  (func (export "_start")
    (local $p i32) (local $end i32) (local $mode i32)
    (loop $grow
      (br_if $grow (i32.ne (memory.grow (i32.const 1)) (i32.const -1))))
    (local.set $end (i32.mul (memory.size) (i32.const 65536)))
    (block $clean
      (loop $scan
        (br_if $clean (i32.ge_u (local.get $p) (local.get $end)))
        (if (i64.ne (i64.load (local.get $p)) (i64.const 0))
          (then (call $proc_exit (i32.const 99))))
        (local.set $p (i32.add (local.get $p) (i32.const 8)))
        (br $scan)))
    ;; iovec {16, 1} at 0, nread at 8
    (i32.store (i32.const 0) (i32.const 16))
    (i32.store (i32.const 4) (i32.const 1))
    (drop (call $fd_read (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 8)))
    (local.set $mode (i32.load8_u (i32.const 16)))
    (memory.fill (i32.const 0) (i32.const 0xa5) (local.get $end))
    (if (i32.eq (local.get $mode) (i32.const 49)) (then (call $proc_exit (i32.const 3))))
    (if (i32.eq (local.get $mode) (i32.const 50)) (then unreachable))
    (if (i32.eq (local.get $mode) (i32.const 51)) (then (loop $spin (br $spin))))))
