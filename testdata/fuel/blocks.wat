;; Nested blocks and ifs: branches out of several levels, blocks with
;; results, if without else, br_if carrying values, and dead code after
;; unconditional branches.
(module
  (func $nest (param $x i32) (result i32)
    (block $a (result i32)
      (block $b (result i32)
        (block $c
          (br_if $c (i32.eq (local.get $x) (i32.const 0)))
          (drop (br_if $b (i32.const 20) (i32.eq (local.get $x) (i32.const 1))))
          (br_if $a (i32.const 30) (i32.eq (local.get $x) (i32.const 2)))
          (drop)
          (if (i32.eq (local.get $x) (i32.const 3))
            (then (br $a (i32.const 40))))
          (br $c)
          ;; dead code after br
          (drop (i32.const 1))
          (unreachable))
        (i32.const 10))
      (i32.add (i32.const 1))))

  ;; if/else with results, nested, and a return from inside.
  (func $sign (param $x i32) (result i32)
    (if (result i32) (i32.lt_s (local.get $x) (i32.const 0))
      (then (i32.const -1))
      (else
        (if (result i32) (i32.eqz (local.get $x))
          (then (return (i32.const 0)))
          (else (i32.const 1))))))

  ;; A block that nothing branches to, around a call: its end does not
  ;; start a new segment.
  (func $plain (param $x i32) (result i32)
    (block
      (local.set $x (i32.mul (local.get $x) (i32.const 7)))
      (block (local.set $x (i32.add (local.get $x) (i32.const 1)))))
    (local.get $x))

  ;; Branch to the function label from a nested block: a return in disguise.
  (func $early (param $x i32) (result i32)
    (block
      (block
        (br_if 2 (i32.const 5) (i32.gt_s (local.get $x) (i32.const 10)))
        (br 1)))
    (i32.const 6))

  (func (export "nest") (result i32 i32 i32 i32 i32)
    (call $nest (i32.const 0)) (call $nest (i32.const 1)) (call $nest (i32.const 2))
    (call $nest (i32.const 3)) (call $nest (i32.const 4)))
  (func (export "sign") (result i32 i32 i32)
    (call $sign (i32.const -5)) (call $sign (i32.const 0)) (call $sign (i32.const 9)))
  (func (export "plain") (result i32) (call $plain (i32.const 6)))
  (func (export "early") (result i32 i32) (call $early (i32.const 3)) (call $early (i32.const 30)))
  ;; Traps must stay the same traps.
  (func (export "div0") (result i32) (i32.div_s (i32.const 1) (i32.const 0)))
  (func (export "trap_unreachable") (unreachable)))
