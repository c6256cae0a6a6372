;; membomb: grows memory 1 MiB at a time until the sandbox refuses, then traps.
(module
  (memory (export "memory") 1)
  (func (export "_start")
    (loop $grow
      (br_if $grow (i32.ne (memory.grow (i32.const 16)) (i32.const -1))))
    unreachable))
