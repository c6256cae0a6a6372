package main

import (
	"math"
	"runtime/debug"
	"testing"

	"github.com/edgeaip/edgeaip/agent/config"
	"github.com/stretchr/testify/assert"
)

func TestTheMemoryLimitComesFromTheConfigUnlessGOMEMLIMITIsSet(t *testing.T) {
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })

	t.Setenv("GOMEMLIMIT", "")
	applyMemoryLimit(0)
	assert.Equal(t, int64(config.DefaultMemoryLimit), debug.SetMemoryLimit(-1), "64 MiB by default")
	applyMemoryLimit(32 << 20)
	assert.Equal(t, int64(32<<20), debug.SetMemoryLimit(-1), "memory_limit from the config")

	debug.SetMemoryLimit(math.MaxInt64)
	t.Setenv("GOMEMLIMIT", "1GiB")
	applyMemoryLimit(32 << 20)
	assert.Equal(t, int64(math.MaxInt64), debug.SetMemoryLimit(-1), "the environment wins: the runtime already applied it")
}
