;; Recursion: direct, mutual, through a table, and unbounded.
(module
  (type $unary (func (param i32) (result i32)))
  (table 2 funcref)
  (elem (i32.const 0) $even_indirect $odd_indirect)

  (func $fib (param $n i32) (result i32)
    (if (result i32) (i32.lt_u (local.get $n) (i32.const 2))
      (then (local.get $n))
      (else (i32.add (call $fib (i32.sub (local.get $n) (i32.const 1)))
                     (call $fib (i32.sub (local.get $n) (i32.const 2)))))))

  (func $ack (param $m i32) (param $n i32) (result i32)
    (if (i32.eqz (local.get $m)) (then (return (i32.add (local.get $n) (i32.const 1)))))
    (if (i32.eqz (local.get $n)) (then (return (call $ack (i32.sub (local.get $m) (i32.const 1)) (i32.const 1)))))
    (call $ack (i32.sub (local.get $m) (i32.const 1))
               (call $ack (local.get $m) (i32.sub (local.get $n) (i32.const 1)))))

  (func $even_indirect (type $unary)
    (if (result i32) (i32.eqz (local.get 0))
      (then (i32.const 1))
      (else (call_indirect (type $unary) (i32.sub (local.get 0) (i32.const 1)) (i32.const 1)))))
  (func $odd_indirect (type $unary)
    (if (result i32) (i32.eqz (local.get 0))
      (then (i32.const 0))
      (else (call_indirect (type $unary) (i32.sub (local.get 0) (i32.const 1)) (i32.const 0)))))

  ;; Recurses n levels deep, then returns n.
  (func $down (param $n i32) (result i32)
    (if (result i32) (i32.eqz (local.get $n))
      (then (i32.const 0))
      (else (i32.add (i32.const 1) (call $down (i32.sub (local.get $n) (i32.const 1)))))))

  (func (export "fib") (result i32) (call $fib (i32.const 20)))
  (func (export "ack") (result i32) (call $ack (i32.const 2) (i32.const 3)))
  (func (export "parity") (result i32 i32)
    (call $even_indirect (i32.const 10)) (call $even_indirect (i32.const 7)))
  (func (export "deep_ok") (result i32) (call $down (i32.const 500)))
  ;; Deeper than any depth limit: fails with call depth exceeded when
  ;; instrumented, and with wazero's own stack overflow when not.
  (func (export "depth_exceeded") (result i32) (call $down (i32.const 100000)))

  ;; Many calls, direct and through the table, each of which counts
  ;; depth: each must give its level back, or the depth limit trips.
  (func (export "many_calls") (result i32)
    (local $i i32) (local $sum i32)
    (loop $next
      (local.set $sum (i32.add (local.get $sum)
        (i32.add (call $down (i32.const 1))
                 (call_indirect (type $unary) (i32.const 2) (i32.const 0)))))
      (br_if $next (i32.lt_u
        (local.tee $i (i32.add (local.get $i) (i32.const 1))) (i32.const 3000))))
    (local.get $sum)))
