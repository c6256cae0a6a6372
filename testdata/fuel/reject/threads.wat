;; Uses an atomic instruction from the threads proposal: rejected.
(module
  (memory 1 1 shared)
  (func (export "add") (result i32)
    (i32.atomic.rmw.add (i32.const 0) (i32.const 1))))
