;; Uses SIMD, which the cost model does not know: Instrument must reject it.
(module
  (func (export "splat") (result i32)
    (i32x4.extract_lane 0 (i32x4.splat (i32.const 7)))))
