;; snapshot: the snapshot form's fixture. Instantiating it writes two data
;; segments far apart and runs a start function; _initialize then changes
;; memory and the mutable globals (and grows memory); run computes from
;; what initialization left, and changes it, so that a run that does not
;; start from a fresh snapshot returns something else.
(module
  (memory (export "memory") 1)
  (global $a (mut i32) (i32.const 1))
  (global $b (mut i64) (i64.const 2))
  (global $k i32 (i32.const 7))
  (global $c (mut f64) (f64.const 0.5))
  (data (i32.const 16) "snapshot")
  (data (i32.const 40000) "far away")
  (start $start)
  (func $start
    (global.set $a (i32.add (global.get $a) (i32.const 10))))
  (func (export "_initialize")
    (local $i i32)
    (global.set $b (i64.add (i64.mul (global.get $b) (i64.const 3)) (i64.extend_i32_u (global.get $a))))
    (global.set $c (f64.mul (global.get $c) (f64.const 3)))
    (drop (memory.grow (i32.const 1)))
    ;; memory[70000 + i] = memory[16 + i] + k, for the 8 bytes of "snapshot"
    (loop $copy
      (i32.store8 (i32.add (i32.const 70000) (local.get $i))
        (i32.add (i32.load8_u (i32.add (i32.const 16) (local.get $i))) (global.get $k)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $copy (i32.lt_u (local.get $i) (i32.const 8)))))
  ;; run sums the bytes initialization wrote and the data far away, adds
  ;; the globals, then changes all of them.
  (func (export "run") (result i64)
    (local $i i32) (local $sum i64)
    (loop $sum
      (local.set $sum (i64.add (local.get $sum)
        (i64.add (i64.load8_u (i32.add (i32.const 70000) (local.get $i)))
                 (i64.load8_u (i32.add (i32.const 40000) (local.get $i))))))
      (i32.store8 (i32.add (i32.const 70000) (local.get $i)) (i32.const 0))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $sum (i32.lt_u (local.get $i) (i32.const 8))))
    (local.set $sum (i64.add (local.get $sum)
      (i64.add (global.get $b) (i64.trunc_f64_s (global.get $c)))))
    (global.set $a (i32.const 0))
    (global.set $b (i64.const 0))
    (global.set $c (f64.const 0))
    (i64.add (local.get $sum) (i64.extend_i32_u (global.get $a)))))
