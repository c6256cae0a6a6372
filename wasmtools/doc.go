// Package wasmtools is the home of everything about tool modules as
// artifacts. Its subpackages hold the guest SDK (sdk) that tools compiled
// with GOOS=wasip1 use, and the stock tools (tools/...).
package wasmtools
