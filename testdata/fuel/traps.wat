;; A trap of every kind the cost model knows, each after the same work, so
;; that a test can check that a call that traps reports the fuel it burned:
;; more than the work alone, the same on every engine. (A memory fault,
;; load or store, reports the count at the last safepoint instead.)
(module
  (type $nullary (func (result i32)))
  (type $void (func))
  (memory (export "memory") 1)
  (table $fns 3 funcref)
  (elem (table $fns) (i32.const 0) func $seven) ;; entries 1 and 2 stay null
  (data $bytes "abc")

  (func $seven (result i32) (i32.const 7))

  ;; work adds n, n-1, ..., 1 into the word at address 0: a loop, and a
  ;; call, before every trap below.
  (func $work (param $n i32)
    (loop $next
      (i32.store (i32.const 0) (i32.add (i32.load (i32.const 0)) (local.get $n)))
      (br_if $next (local.tee $n (i32.sub (local.get $n) (i32.const 1))))))

  ;; crash traps two frames down from the export.
  (func $crash (param $addr i32) (result i32)
    (i32.load (local.get $addr)))

  (func (export "work") (call $work (i32.const 100)))

  (func (export "unreachable") (call $work (i32.const 100)) (unreachable))
  (func (export "load") (result i32) (call $work (i32.const 100)) (i32.load (i32.const 65536)))
  (func (export "store") (call $work (i32.const 100)) (i64.store (i32.const 65535) (i64.const 1)))
  (func (export "div") (result i32) (call $work (i32.const 100)) (i32.div_u (i32.const 1) (i32.const 0)))
  (func (export "overflow") (result i32)
    (call $work (i32.const 100)) (i32.div_s (i32.const 0x80000000) (i32.const -1)))
  (func (export "rem64") (result i64) (call $work (i32.const 100)) (i64.rem_s (i64.const 1) (i64.const 0)))
  (func (export "trunc") (result i64) (call $work (i32.const 100)) (i64.trunc_f64_u (f64.const -1)))
  (func (export "null_call") (result i32)
    (call $work (i32.const 100)) (call_indirect $fns (type $nullary) (i32.const 1)))
  (func (export "mistyped_call")
    (call $work (i32.const 100)) (call_indirect $fns (type $void) (i32.const 0)))
  (func (export "missing_call") (result i32)
    (call $work (i32.const 100)) (call_indirect $fns (type $nullary) (i32.const 3)))
  (func (export "table_get") (result funcref) (call $work (i32.const 100)) (table.get $fns (i32.const 3)))
  (func (export "table_set")
    (call $work (i32.const 100)) (table.set $fns (i32.const 3) (ref.null func)))
  (func (export "fill") (call $work (i32.const 100)) (memory.fill (i32.const 65000) (i32.const 0) (i32.const 1000)))
  (func (export "copy") (call $work (i32.const 100)) (memory.copy (i32.const 0) (i32.const 65000) (i32.const 1000)))
  (func (export "init") (call $work (i32.const 100)) (memory.init $bytes (i32.const 0) (i32.const 2) (i32.const 2)))
  (func (export "in_callee") (result i32) (call $work (i32.const 100)) (call $crash (i32.const 70000)))

  ;; The trap ends a loop: it stores a page further on every iteration,
  ;; until it leaves memory.
  (func (export "in_loop")
    (local $addr i32)
    (call $work (i32.const 100))
    (loop $next
      (i32.store (local.get $addr) (i32.const 1))
      (local.set $addr (i32.add (local.get $addr) (i32.const 4096)))
      (br $next))))
