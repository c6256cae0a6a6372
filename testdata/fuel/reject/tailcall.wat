;; Uses return_call from the tail-call proposal: rejected.
(module
  (func $f (result i32) (i32.const 1))
  (func (export "g") (result i32) (return_call $f)))
