;; state: a reactor whose calls show what state they start from. Its
;; initialization sets a byte of memory and a global to 'A' and sums its
;; data; each call then prints four bytes: the byte, the global, 'O' if
;; fd 4 is open when it starts (a file an earlier call left open) or 'C',
;; and the memory size in pages as a digit. It then changes all of it:
;; bumps byte and global, grows memory by a page, and opens (creating)
;; leak.txt in its first preopened dir, if it has one, leaving it open as
;; fd 4. A call that starts from a fresh instance of the snapshot prints
;; "AAC1" every time.
;;
;; Parameters steer it (the first byte of stdin): 't' changes the state
;; and then traps, 'x' changes it and exits with status 3; anything else
;; sums the bytes of stdin first, work whose fuel the tests compare.
(module
  (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_fdstat_get" (func $fd_fdstat_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_open"
    (func $path_open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))
  (memory (export "memory") 1)
  (global $g (mut i32) (i32.const 0))
  (global $sum (mut i64) (i64.const 0))
  (data (i32.const 256) "leak.txt")
  (data (i32.const 300) "the data of the module, summed by its initialization")
  ;; 100: the byte; 104: iovec; 112: count; 120: fdstat; 200: output;
  ;; 1024: stdin.
  (func (export "_initialize")
    (local $i i32)
    (i32.store8 (i32.const 100) (i32.const 65))
    (global.set $g (i32.const 65))
    (loop $sum
      (global.set $sum (i64.add (global.get $sum) (i64.load8_u (i32.add (i32.const 300) (local.get $i)))))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $sum (i32.lt_u (local.get $i) (i32.const 52)))))
  (func $change
    (i32.store8 (i32.const 100) (i32.add (i32.load8_u (i32.const 100)) (i32.const 1)))
    (global.set $g (i32.add (global.get $g) (i32.const 1)))
    (drop (memory.grow (i32.const 1))))
  (func (export "aip_call") (result i32)
    (local $n i32) (local $i i32) (local $sum i64)
    (i32.store (i32.const 104) (i32.const 1024))
    (i32.store (i32.const 108) (i32.const 4096))
    (drop (call $fd_read (i32.const 0) (i32.const 104) (i32.const 1) (i32.const 112)))
    (local.set $n (i32.load (i32.const 112)))
    (if (i32.eq (i32.load8_u (i32.const 1024)) (i32.const 116)) ;; 't'
      (then (call $change) unreachable))
    (if (i32.eq (i32.load8_u (i32.const 1024)) (i32.const 120)) ;; 'x'
      (then (call $change) (call $proc_exit (i32.const 3))))
    (block $done
      (loop $each
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $sum (i64.add (local.get $sum) (i64.load8_u (i32.add (i32.const 1024) (local.get $i)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $each)))
    (global.set $sum (i64.add (global.get $sum) (local.get $sum)))
    (i32.store8 (i32.const 200) (i32.load8_u (i32.const 100)))
    (i32.store8 (i32.const 201) (global.get $g))
    (i32.store8 (i32.const 202)
      (select (i32.const 67) (i32.const 79) (call $fd_fdstat_get (i32.const 4) (i32.const 120))))
    (i32.store8 (i32.const 203) (i32.add (i32.const 48) (memory.size)))
    (i32.store (i32.const 104) (i32.const 200))
    (i32.store (i32.const 108) (i32.const 4))
    (drop (call $fd_write (i32.const 1) (i32.const 104) (i32.const 1) (i32.const 112)))
    (call $change)
    ;; fd 3, leak.txt (8 bytes), O_CREAT, rights fd_write, new fd at 112.
    (drop (call $path_open (i32.const 3) (i32.const 0) (i32.const 256) (i32.const 8) (i32.const 1)
      (i64.const 0x40) (i64.const 0) (i32.const 0) (i32.const 112)))
    (i32.const 0)))
