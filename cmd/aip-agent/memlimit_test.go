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

func TestTheGCPercentComesFromTheConfigUnlessGOGCIsSet(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })

	t.Setenv("GOGC", "")
	applyGCPercent(0)
	assert.Equal(t, config.DefaultGCPercent, debug.SetGCPercent(100), "50 by default")
	applyGCPercent(80)
	assert.Equal(t, 80, debug.SetGCPercent(100), "gc_percent from the config")

	t.Setenv("GOGC", "200")
	applyGCPercent(80)
	assert.Equal(t, 100, debug.SetGCPercent(100), "the environment wins: the runtime already applied it")
}
