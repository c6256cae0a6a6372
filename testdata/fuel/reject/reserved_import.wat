;; Imports from the metering host module itself: rejected.
(module
  (import "edgeaip_meter" "safepoint" (func $sp (param i32)))
  (func (export "f") (call $sp (i32.const 0))))
