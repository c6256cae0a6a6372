;; initspin: a hostile reactor whose initialization never ends. Its
;; fuel budget or its deadline refuses it at load.
(module
  (memory (export "memory") 1)
  (func (export "_initialize") (loop $forever (br $forever)))
  (func (export "aip_call") (result i32) (i32.const 0)))
