;; A table the host can see (it is exported) that also holds an import.
;; Twins cannot go into such a table, so calls through it go to wrappers,
;; which read and write the counter global.
(module
  (import "wasi_snapshot_preview1" "sched_yield" (func $yield (result i32)))
  (type $nullary (func (result i32)))
  (type $unary (func (param i32) (result i32)))
  (table (export "table") 4 funcref)
  (elem (i32.const 0) $yield $count_down $seven)

  (func $seven (result i32) (i32.const 7))

  ;; Recursion through the table.
  (func $count_down (param $n i32) (result i32)
    (if (result i32) (i32.eqz (local.get $n))
      (then (i32.const 0))
      (else (i32.add (i32.const 1)
        (call_indirect (type $unary) (i32.sub (local.get $n) (i32.const 1)) (i32.const 1))))))

  (func (export "through_table") (result i32 i32 i32)
    (call_indirect (type $nullary) (i32.const 0))
    (call_indirect (type $unary) (i32.const 50) (i32.const 1))
    (call_indirect (type $nullary) (i32.const 2)))

  ;; Loops forever calling an import. The loop's first segment ends in a
  ;; call, which checks every iteration, so its back edge does not.
  (func (export "spin_yield")
    (loop $forever
      (drop (call $yield))
      (br $forever)))

  ;; Deeper than any depth limit, through the table.
  (func (export "depth_through_table") (result i32)
    (call_indirect (type $unary) (i32.const 5000) (i32.const 1)))

  ;; Many calls through the table to a function that counts depth: each
  ;; must give its levels back, or the depth limit trips.
  (func (export "many_through_table") (result i32)
    (local $i i32) (local $sum i32)
    (loop $next
      (local.set $sum (i32.add (local.get $sum)
        (call_indirect (type $unary) (i32.const 1) (i32.const 1))))
      (br_if $next (i32.lt_u
        (local.tee $i (i32.add (local.get $i) (i32.const 1))) (i32.const 3000))))
    (local.get $sum)))
