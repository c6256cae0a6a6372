;; br_table dispatch: a bytecode interpreter loop and a switch with a
;; default, including br_table targets that are the function's own label.
(module
  (memory (export "memory") 1)
  ;; A tiny stack machine program: 0 halt, 1 push imm, 2 add, 3 mul,
  ;; 4 dup, 5 jump-if-nonzero-back(imm), 6 dec.
  (data (i32.const 0) "\01\05\01\00\02\04\06\04\05\03\00")

  (func $run (param $pc i32) (result i32)
    (local $acc i32) (local $tmp i32) (local $steps i32)
    (loop $fetch
      (local.set $steps (i32.add (local.get $steps) (i32.const 1)))
      (block $dec
        (block $jnz
          (block $dup
            (block $mul
              (block $add
                (block $push
                  (block $halt
                    (br_table $halt $push $add $mul $dup $jnz $dec $halt
                      (i32.load8_u (local.get $pc))))
                  ;; halt
                  (return (i32.add (local.get $acc) (i32.mul (local.get $steps) (i32.const 1000)))))
                ;; push: acc = imm
                (local.set $acc (i32.load8_u (i32.add (local.get $pc) (i32.const 1))))
                (local.set $pc (i32.add (local.get $pc) (i32.const 2)))
                (br $fetch))
              ;; add: acc += acc
              (local.set $acc (i32.add (local.get $acc) (local.get $acc)))
              (local.set $pc (i32.add (local.get $pc) (i32.const 1)))
              (br $fetch))
            (local.set $acc (i32.mul (local.get $acc) (i32.const 3)))
            (local.set $pc (i32.add (local.get $pc) (i32.const 1)))
            (br $fetch))
          (local.set $tmp (local.get $acc))
          (local.set $pc (i32.add (local.get $pc) (i32.const 1)))
          (br $fetch))
        ;; jnz back by imm while tmp != 0
        (if (local.get $tmp)
          (then (local.set $pc (i32.sub (local.get $pc) (i32.load8_u (i32.add (local.get $pc) (i32.const 1))))))
          (else (local.set $pc (i32.add (local.get $pc) (i32.const 2)))))
        (br $fetch))
      ;; dec tmp
      (local.set $tmp (i32.sub (local.get $tmp) (i32.const 1)))
      (local.set $pc (i32.add (local.get $pc) (i32.const 1)))
      (br $fetch))
    (unreachable))

  ;; A switch whose default and one case leave the function directly.
  (func $classify (param $x i32) (result i32)
    (block $b2
      (block $b1
        (block $b0
          (br_table $b0 $b1 $b2 0 (local.get $x)))
        (return (i32.const 100)))
      (return (i32.const 200)))
    (i32.const 300))

  (func (export "interp") (result i32) (call $run (i32.const 0)))
  (func (export "classify") (result i32 i32 i32 i32 i32)
    (call $classify (i32.const 0))
    (call $classify (i32.const 1))
    (call $classify (i32.const 2))
    (call $classify (i32.const 3))
    (call $classify (i32.const 99))))
