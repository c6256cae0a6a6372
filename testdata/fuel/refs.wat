;; Reference types, typed select, sign extension and saturating
;; conversions: the post-MVP features Go, clang and Rust emit.
(module
  (type $nullary (func (result i32)))
  (table $fns 3 funcref)
  (table $ext 1 externref)
  (elem declare func $forty_two)
  (elem (table $fns) (i32.const 0) funcref (ref.func $seven) (ref.null func) (ref.func $forty_two))
  (global $g (mut funcref) (ref.func $seven))

  (func $seven (result i32) (i32.const 7))
  (func $forty_two (result i32) (i32.const 42))

  (func (export "refs") (result i32 i32 i32 i32)
    (table.set $fns (i32.const 1) (ref.func $forty_two))
    (call_indirect $fns (type $nullary) (i32.const 1))
    (ref.is_null (table.get $fns (i32.const 1)))
    (ref.is_null (table.get $ext (i32.const 0)))
    (table.set $fns (i32.const 1) (global.get $g))
    (call_indirect $fns (type $nullary) (i32.const 1)))

  (func (export "null_call") (result i32)
    (table.set $fns (i32.const 1) (ref.null func))
    (call_indirect $fns (type $nullary) (i32.const 1)))

  (func (export "select_typed") (result i32 i64)
    (select (result i32) (i32.const 1) (i32.const 2) (i32.const 0))
    (select (i64.const 3) (i64.const 4) (i32.const 1)))

  (func (export "sign_ext") (result i32 i32 i64 i64 i64)
    (i32.extend8_s (i32.const 0x80))
    (i32.extend16_s (i32.const 0x8000))
    (i64.extend8_s (i64.const 0xff))
    (i64.extend16_s (i64.const 0x7fff))
    (i64.extend32_s (i64.const 0x80000000)))

  (func (export "sat") (result i32 i32 i64 i64)
    (i32.trunc_sat_f32_s (f32.const 1e20))
    (i32.trunc_sat_f64_u (f64.const -3))
    (i64.trunc_sat_f64_s (f64.const nan))
    (i64.trunc_sat_f32_u (f32.const 12.75)))

  (func (export "trap_trunc") (result i32) (i32.trunc_f32_s (f32.const 1e20))))
