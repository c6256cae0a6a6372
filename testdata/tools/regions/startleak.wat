;; startleak: its start function (the start section, run while wazero
;; instantiates it) grows its memory as far as the sandbox lets it, writes
;; every page, then traps: instantiation fails after the memory was made.
(module
  (memory (export "memory") 1)
  (func $start
    (loop $grow
      (br_if $grow (i32.ne (memory.grow (i32.const 1)) (i32.const -1))))
    (memory.fill (i32.const 0) (i32.const 0xa5) (i32.mul (memory.size) (i32.const 65536)))
    unreachable)
  (start $start)
  (func (export "_start")))
