;; Multi-value: functions with several results, blocks, loops and ifs with
;; parameters and results.
(module
  (func $divmod (param $a i32) (param $b i32) (result i32 i32)
    (i32.div_u (local.get $a) (local.get $b))
    (i32.rem_u (local.get $a) (local.get $b)))

  ;; Swap through a block with parameters.
  (func $swap (param i32 i32) (result i32 i32)
    (local.get 1) (local.get 0)
    (block (param i32 i32) (result i32 i32)))

  ;; Fibonacci with the pair carried on the stack through a loop.
  (func $fibpair (param $n i32) (result i64)
    (i64.const 0) (i64.const 1)
    (loop $l (param i64 i64) (result i64 i64)
      (if (param i64 i64) (result i64 i64) (i32.eqz (local.get $n))
        (then)
        (else
          (local.set $n (i32.sub (local.get $n) (i32.const 1)))
          (call $step)
          (br $l))))
    (drop))

  (func $step (param $a i64) (param $b i64) (result i64 i64)
    (local.get $b) (i64.add (local.get $a) (local.get $b)))

  (func (export "divmod") (result i32 i32) (call $divmod (i32.const 47) (i32.const 5)))
  (func (export "swap") (result i32 i32) (call $swap (i32.const 1) (i32.const 2)))
  (func (export "fibpair") (result i64) (call $fibpair (i32.const 80)))
  (func (export "mixed") (result i32 i64 f32 f64)
    (i32.const 1) (i64.const 2) (f32.const 3.5) (f64.const 4.25)
    (block (param i32 i64 f32 f64) (result i32 i64 f32 f64))))
