;; initgrow: a hostile reactor whose initialization grows memory a
;; MiB at a time until the sandbox refuses, then traps, as a runtime out
;; of memory would. It is refused at load, and never gets a call.
(module
  (memory (export "memory") 1)
  (func (export "_initialize")
    (loop $grow
      (br_if $grow (i32.ne (memory.grow (i32.const 16)) (i32.const -1))))
    unreachable)
  (func (export "aip_call") (result i32) (i32.const 0)))
