;; Loops: counted, nested, do-while and early exit. Every export takes no
;; parameters so that a test can call it the same way on any engine.
(module
  (memory (export "memory") 1)

  ;; A start function runs at instantiation, before any export.
  (start $init)
  (func $init (i32.store (i32.const 65532) (i32.const 0x5eed)))

  ;; Sum 1..n with a single counted loop.
  (func $sum (param $n i32) (result i64)
    (local $acc i64)
    (block $done
      (loop $next
        (br_if $done (i32.eqz (local.get $n)))
        (local.set $acc (i64.add (local.get $acc) (i64.extend_i32_u (local.get $n))))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $next)))
    (local.get $acc))

  ;; Count primes below n by trial division: two nested loops, an inner
  ;; early exit, and a loop whose body ends in a conditional back edge.
  (func $primes (param $n i32) (result i32)
    (local $i i32) (local $d i32) (local $count i32) (local $prime i32)
    (local.set $i (i32.const 2))
    (block $out
      (loop $outer
        (br_if $out (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $prime (i32.const 1))
        (local.set $d (i32.const 2))
        (block $inner_out
          (loop $inner
            (br_if $inner_out (i32.gt_u (i32.mul (local.get $d) (local.get $d)) (local.get $i)))
            (if (i32.eqz (i32.rem_u (local.get $i) (local.get $d)))
              (then (local.set $prime (i32.const 0)) (br $inner_out)))
            (local.set $d (i32.add (local.get $d) (i32.const 1)))
            (br $inner)))
        (local.set $count (i32.add (local.get $count) (local.get $prime)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $outer)))
    (local.get $count))

  ;; A do-while loop that writes memory: fill bytes with a running hash.
  (func $scribble (param $n i32) (result i32)
    (local $i i32) (local $h i32)
    (local.set $h (i32.const 2166136261))
    (loop $again
      (local.set $h (i32.mul (i32.xor (local.get $h) (local.get $i)) (i32.const 16777619)))
      (i32.store8 (local.get $i) (local.get $h))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $again (i32.lt_u (local.get $i) (local.get $n))))
    (local.get $h))

  ;; A loop whose header is also a block target inside it.
  (func $collatz (param $n i64) (result i32)
    (local $steps i32)
    (loop $l
      (block $odd
        (block $even
          (br_if $odd (i64.eq (local.get $n) (i64.const 1)))
          (br_if $even (i64.eqz (i64.and (local.get $n) (i64.const 1))))
          (local.set $n (i64.add (i64.mul (local.get $n) (i64.const 3)) (i64.const 1)))
          (local.set $steps (i32.add (local.get $steps) (i32.const 1)))
          (br $l))
        (local.set $n (i64.shr_u (local.get $n) (i64.const 1)))
        (local.set $steps (i32.add (local.get $steps) (i32.const 1)))
        (br $l)))
    (local.get $steps))

  (func (export "sum_small") (result i64) (call $sum (i32.const 10)))
  (func (export "sum_big") (result i64) (call $sum (i32.const 100000)))
  (func (export "primes") (result i32) (call $primes (i32.const 5000)))
  (func (export "scribble") (result i32) (call $scribble (i32.const 4000)))
  (func (export "collatz") (result i32 i32)
    (call $collatz (i64.const 27))
    (call $collatz (i64.const 837799))))
