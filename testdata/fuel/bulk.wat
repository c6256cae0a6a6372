;; Bulk memory and table operations, whose fuel cost depends on their
;; length operand, and memory.grow, which costs per page.
(module
  (memory (export "memory") 1 4)
  (data $greeting "hello, bulk memory")
  (table $t 4 16 funcref)
  (elem $fns func $one $two $three)

  (func $one (result i32) (i32.const 1))
  (func $two (result i32) (i32.const 2))
  (func $three (result i32) (i32.const 3))

  ;; Sum of n bytes starting at p.
  (func $sum (param $p i32) (param $n i32) (result i32)
    (local $acc i32)
    (block $done
      (loop $l
        (br_if $done (i32.eqz (local.get $n)))
        (local.set $acc (i32.add (local.get $acc) (i32.load8_u (local.get $p))))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $l)))
    (local.get $acc))

  (func (export "fill_copy") (result i32)
    (memory.fill (i32.const 100) (i32.const 7) (i32.const 5000))
    (memory.copy (i32.const 20000) (i32.const 100) (i32.const 3000))
    (memory.copy (i32.const 150) (i32.const 100) (i32.const 64))
    (i32.add (call $sum (i32.const 0) (i32.const 6000))
             (call $sum (i32.const 19990) (i32.const 3020))))

  (func (export "init_drop") (result i32)
    (memory.init $greeting (i32.const 500) (i32.const 0) (i32.const 18))
    (memory.init $greeting (i32.const 600) (i32.const 7) (i32.const 4))
    (data.drop $greeting)
    (call $sum (i32.const 500) (i32.const 120)))

  ;; Re-initialising a dropped segment traps, after paying for it.
  (func (export "init_after_drop")
    (data.drop $greeting)
    (memory.init $greeting (i32.const 0) (i32.const 0) (i32.const 1)))

  (func (export "fill_out_of_bounds")
    (memory.fill (i32.const 65000) (i32.const 1) (i32.const 1000)))

  (func (export "grow") (result i32 i32 i32 i32)
    (memory.grow (i32.const 1))
    (memory.grow (i32.const 2))
    (memory.grow (i32.const 1)) ;; exceeds the maximum of 4: returns -1
    (memory.size))

  (func (export "tables") (result i32 i32 i32 i32)
    (table.init $t $fns (i32.const 0) (i32.const 0) (i32.const 3))
    (table.copy $t $t (i32.const 3) (i32.const 0) (i32.const 1))
    (elem.drop $fns)
    (drop (table.grow $t (ref.null func) (i32.const 4)))
    (table.fill $t (i32.const 4) (ref.func $three) (i32.const 4))
    (table.size $t)
    (call_indirect (result i32) (i32.const 3))
    (call_indirect (result i32) (i32.const 1))
    (call_indirect (result i32) (i32.const 7))))
