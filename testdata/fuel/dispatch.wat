;; State machines in the shape Go's compiler gives every function: a loop
;; whose body starts with a ladder of blocks and a br_table on a state
;; local, and jumps that set the state to a constant and branch back to
;; the loop. Jumps to a later state need no fuel check; jumps to the same
;; or an earlier one must keep theirs.
(module
  ;; acc = ((1 + 1) * 2 + 1) * 2 ... n times, then a final forward jump.
  (func $machine (param $n i32) (result i32)
    (local $state i32) (local $acc i32)
    (loop $L
      (block $b2
        (block $b1
          (block $b0
            (br_table $b0 $b1 $b2 $b2 (local.get $state)))
          ;; region 0: forward to state 1
          (local.set $acc (i32.add (local.get $acc) (i32.const 1)))
          (local.set $state (i32.const 1))
          (br $L))
        ;; region 1: back to state 0 while n > 0, else forward to state 2
        (local.set $acc (i32.mul (local.get $acc) (i32.const 2)))
        (if (local.get $n)
          (then
            (local.set $n (i32.sub (local.get $n) (i32.const 1)))
            (local.set $state (i32.const 0))
            (br $L)))
        (local.set $state (i32.const -1)) ;; out of range: the default, region 2
        (br $L))
      ;; region 2
      (return (local.get $acc)))
    (unreachable))

  ;; Cycles forever between two states; only the backward jump is checked.
  (func $forever (result i32)
    (local $state i32) (local $count i32)
    (loop $L
      (block $b1
        (block $b0
          (br_table $b0 $b1 (local.get $state)))
        (local.set $count (i32.add (local.get $count) (i32.const 1)))
        (local.set $state (i32.const 1))
        (br $L))
      (local.set $state (i32.const 0))
      (br $L))
    (unreachable))

  (func (export "machine") (result i32 i32)
    (call $machine (i32.const 0))
    (call $machine (i32.const 10)))
  (func (export "spin_machine") (result i32) (call $forever)))
