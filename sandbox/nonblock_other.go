//go:build !unix

package sandbox

// openNonblock: elsewhere there are no FIFOs to wait on.
const openNonblock = 0
