;; recurse: calls itself without end.
(module
  (memory (export "memory") 1)
  (func $down (param i32) (call $down (i32.add (local.get 0) (i32.const 1))))
  (func (export "_start") (call $down (i32.const 0))))
