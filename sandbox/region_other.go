//go:build !linux

package sandbox

import "errors"

// mapRegion is Linux-only; elsewhere linear memory lives on the Go heap.
func mapRegion(uint64) ([]byte, error) { return nil, errors.ErrUnsupported }

func unmapRegion([]byte) {}
