;; pause: sleeps for the number of milliseconds in its parameters ({"ms": N},
;; the first run of digits on stdin), then echoes its parameters. Tests use it
;; as a tool that takes a while, without burning CPU.
(module
  (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "poll_oneoff" (func $poll_oneoff (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  ;; iovec {ptr, len} at 0, count at 8, subscription at 64 (48 bytes),
  ;; event at 128 (32 bytes), input from 256.
  (func (export "_start")
    (local $n i32) (local $i i32) (local $c i32) (local $ms i64)
    (i32.store (i32.const 0) (i32.const 256))
    (i32.store (i32.const 4) (i32.const 1024))
    (drop (call $fd_read (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 8)))
    (local.set $n (i32.load (i32.const 8)))
    ;; skip to the first digit, then accumulate digits
    (block $found
      (loop $skip
        (br_if $found (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $c (i32.load8_u (i32.add (i32.const 256) (local.get $i))))
        (br_if $found (i32.lt_u (i32.sub (local.get $c) (i32.const 48)) (i32.const 10)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $skip)))
    (block $done
      (loop $digits
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $c (i32.sub (i32.load8_u (i32.add (i32.const 256) (local.get $i))) (i32.const 48)))
        (br_if $done (i32.ge_u (local.get $c) (i32.const 10)))
        (local.set $ms (i64.add (i64.mul (local.get $ms) (i64.const 10)) (i64.extend_i32_u (local.get $c))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $digits)))
    ;; one relative clock subscription on the monotonic clock
    (i32.store8 (i32.const 72) (i32.const 0))
    (i32.store (i32.const 80) (i32.const 1))
    (i64.store (i32.const 88) (i64.mul (local.get $ms) (i64.const 1000000)))
    (i64.store (i32.const 96) (i64.const 0))
    (i32.store16 (i32.const 104) (i32.const 0))
    (drop (call $poll_oneoff (i32.const 64) (i32.const 128) (i32.const 1) (i32.const 8)))
    (i32.store (i32.const 4) (local.get $n))
    (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))))
