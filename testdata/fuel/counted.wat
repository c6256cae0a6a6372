;; Counted loops, the shapes the rewriter versions (wasmtools/meter/counted.go):
;; a body of one segment whose back edge tests j < n or j != n after j += x.
;; Each export runs one with edge cases of its trip count: a loop that runs
;; once, steps that are not positive, values that would wrap, a loop too long
;; for one slice, and a memory fault in the middle.
(module
  (memory (export "memory") 1)

  ;; Stores v to every x-th word from j to below n (signed), returns the last j.
  (func $fill_lt (param $j i32) (param $x i32) (param $n i32) (param $v i32) (result i32)
    (loop $l
      (i32.store (i32.and (i32.shl (local.get $j) (i32.const 2)) (i32.const 0xfffc)) (local.get $v))
      (br_if $l (i32.lt_s (local.tee $j (i32.add (local.get $x) (local.get $j))) (local.get $n))))
    (local.get $j))

  ;; The same with an unsigned compare and the step a constant.
  (func $fill_ltu (param $j i32) (param $n i32) (param $v i32) (result i32)
    (loop $l
      (i32.store8 (i32.and (local.get $j) (i32.const 0xffff)) (local.get $v))
      (br_if $l (i32.lt_u (local.tee $j (i32.add (local.get $j) (i32.const 3))) (local.get $n))))
    (local.get $j))

  ;; Counts up to n with j != n, then down with j != m.
  (func $up_down (param $j i32) (param $n i32) (param $m i32) (result i32)
    (local $sum i32)
    (loop $up
      (local.set $sum (i32.add (local.get $sum) (local.get $j)))
      (br_if $up (i32.ne (local.tee $j (i32.add (local.get $j) (i32.const 1))) (local.get $n))))
    (loop $down
      (local.set $sum (i32.xor (local.get $sum) (local.get $j)))
      (br_if $down (i32.ne (local.tee $j (i32.add (local.get $j) (i32.const -1))) (local.get $m))))
    (i32.add (local.get $sum) (local.get $j)))

  ;; Walks byte offsets from j to n with j != n, x bytes a step, summing words.
  (func $walk_ne16 (param $j i32) (param $n i32) (result i32)
    (local $sum i32)
    (loop $l
      (local.set $sum (i32.add (local.get $sum) (i32.load (i32.and (local.get $j) (i32.const 0xfffc)))))
      (br_if $l (i32.ne (local.tee $j (i32.add (local.get $j) (i32.const 16))) (local.get $n))))
    (local.get $sum))
  (func $walk_ne12 (param $j i32) (param $n i32) (result i32)
    (local $sum i32)
    (loop $l
      (local.set $sum (i32.add (local.get $sum) (i32.load (i32.and (local.get $j) (i32.const 0xfffc)))))
      (br_if $l (i32.ne (local.tee $j (i32.add (i32.const 12) (local.get $j))) (i32.const 1200))))
    (i32.add (local.get $sum) (local.get $j)))
  (func $walk_down8 (param $j i32) (param $n i32) (result i32)
    (local $sum i32)
    (loop $l
      (local.set $sum (i32.xor (local.get $sum) (i32.load (i32.and (local.get $j) (i32.const 0xfffc)))))
      (br_if $l (i32.ne (local.tee $j (i32.add (local.get $j) (i32.const -8))) (local.get $n))))
    (i32.add (local.get $sum) (local.get $j)))

  ;; Stores every 7th word across the whole memory and beyond: traps.
  (func $fault (result i32)
    (local $p i32)
    (loop $l
      (i32.store (local.get $p) (local.get $p))
      (br_if $l (i32.lt_s (local.tee $p (i32.add (local.get $p) (i32.const 28))) (i32.const 100000))))
    (local.get $p))

  (func (export "lt") (result i32)
    (i32.add (call $fill_lt (i32.const 0) (i32.const 5) (i32.const 20000) (i32.const 7))
      (call $fill_lt (i32.const -300) (i32.const 1) (i32.const 300) (i32.const 8))))
  (func (export "lt_once") (result i32)
    (i32.add (call $fill_lt (i32.const 50) (i32.const 3) (i32.const 10) (i32.const 9))
      (call $fill_lt (i32.const 50) (i32.const -3) (i32.const 10) (i32.const 10))))
  (func (export "lt_zero_step") (result i32)
    (call $fill_lt (i32.const 40) (i32.const 0) (i32.const 10) (i32.const 11)))
  (func (export "lt_wraps") (result i32)
    ;; 0x7ffffff0 + 0x40000000 wraps: j goes negative and round again, 4 times.
    (call $fill_lt (i32.const 0x7ffffff0) (i32.const 0x40000000) (i32.const 0x7ffffff0) (i32.const 12)))
  (func (export "lt_near_max") (result i32)
    (call $fill_lt (i32.const 0x7fff0000) (i32.const 0x1000) (i32.const 0x7ffff000) (i32.const 13)))
  (func (export "lt_long") (result i32)
    (call $fill_lt (i32.const 0) (i32.const 1) (i32.const 1500000) (i32.const 14)))
  (func (export "ltu") (result i32)
    (i32.add (call $fill_ltu (i32.const 0) (i32.const 60000) (i32.const 15))
      (i32.add (call $fill_ltu (i32.const 0xfffffff0) (i32.const 0xffffffff) (i32.const 16))
        (call $fill_ltu (i32.const 5) (i32.const 0) (i32.const 17)))))
  (func (export "ne") (result i32)
    (i32.add (call $up_down (i32.const -1000) (i32.const 2000) (i32.const 0))
      (call $up_down (i32.const 5) (i32.const 6) (i32.const 5))))
  (func (export "ne_steps") (result i32)
    (drop (call $fill_lt (i32.const 0) (i32.const 1) (i32.const 16000) (i32.const 0x01010101)))
    (i32.add (call $walk_ne16 (i32.const 64) (i32.const 32064))
      (i32.add (call $walk_ne12 (i32.const 0) (i32.const 1200))
        (i32.add (call $walk_ne12 (i32.const 1188) (i32.const 1200))
          (call $walk_down8 (i32.const 8000) (i32.const -8000))))))
  (func (export "fault") (result i32) (call $fault))
)
