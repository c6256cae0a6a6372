//go:build !(go1.26 && !go1.27)

package reactor

// The reactor form reseeds the Go runtime's random state through its
// internals (reseed_go126_wasip1.go), whose layout was checked for Go 1.26
// only. Building with another Go version fails here, on purpose: check
// runtime/rand.go's globalRand and mrandinit for that version, then widen
// the build constraints.
var _ = reactorReseedsTheRuntimeOfGo126Only
