package wasmtools

import "embed"

// SDKSource is the source of the Go SDK, packages sdk and sdk/reactor,
// tests included, at their paths in this module (sdk/sdk.go, ...). The
// module is not published: package scaffold writes a copy of it beside a
// new tool, so that the tool builds with nothing but a Go toolchain.
//
//go:embed sdk/*.go sdk/reactor/*.go
var SDKSource embed.FS
