;; Calls through a table, for the snapshot form, which turns them into
;; direct calls: slots of two types, a function in two slots, an empty
;; slot, and a recursion through the table.
(module
  (type $nullary (func (result i32)))
  (type $unary (func (param i32) (result i32)))
  (memory 1)
  (table 6 funcref)
  (elem (i32.const 0) $seven $double $seven)
  (elem (i32.const 4) $down)

  (func $seven (result i32) (i32.const 7))
  (func $double (param i32) (result i32) (i32.mul (local.get 0) (i32.const 2)))

  ;; Recurses n levels deep through the table, then returns n.
  (func $down (param $n i32) (result i32)
    (if (result i32) (i32.eqz (local.get $n))
      (then (i32.const 0))
      (else (i32.add (i32.const 1)
        (call_indirect (type $unary) (i32.sub (local.get $n) (i32.const 1)) (i32.const 4))))))

  (func (export "through_table") (result i32 i32 i32)
    (call_indirect (type $nullary) (i32.const 0))
    (call_indirect (type $unary) (i32.const 21) (i32.const 1))
    (call_indirect (type $nullary) (i32.const 2)))
  (func (export "deep_ok") (result i32)
    (call_indirect (type $unary) (i32.const 900) (i32.const 4)))
  ;; Deeper than the depth limit, each level through the table.
  (func (export "depth_exceeded") (result i32)
    (call_indirect (type $unary) (i32.const 1500) (i32.const 4)))
  (func (export "empty_slot") (result i32) (call_indirect (type $nullary) (i32.const 3)))
  (func (export "past_the_end") (result i32) (call_indirect (type $nullary) (i32.const 6)))
  (func (export "wrong_type") (result i32) (call_indirect (type $nullary) (i32.const 1))))
