package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReportPairsRunsAndTakesMedians(t *testing.T) {
	in := `goos: linux
BenchmarkFuel/prog=fib/variant=unmetered-2         	      10	 100000000 ns/op
BenchmarkFuel/prog=fib/variant=metered-2           	      10	 110000000 ns/op
BenchmarkFuel/prog=fib/variant=closeOnContextDone-2	       1	2000000000 ns/op
BenchmarkFuel/prog=sieve/variant=unmetered-2       	      10	  50000000 ns/op
BenchmarkFuel/prog=sieve/variant=metered-2         	      10	  60000000 ns/op
BenchmarkFuel/prog=fib/variant=unmetered-2         	      10	 200000000 ns/op
BenchmarkFuel/prog=fib/variant=metered-2           	      10	 220000000 ns/op
BenchmarkFuel/prog=fib/variant=closeOnContextDone-2	       1	4000000000 ns/op
PASS
`
	samples, order, err := parse(strings.NewReader(in))
	require.NoError(t, err)
	assert.Equal(t, []string{"fib", "sieve"}, order)

	assert.Nil(t, samples[cpuNs], "no cpu-ns/op in the input")
	var out bytes.Buffer
	report(&out, samples[wallNs], order)
	lines := strings.Split(out.String(), "\n")
	assert.Regexp(t, `^fib\s+150\.0\s+165\.0\s+3000\.0\s+1\.100\s+20\.000$`, lines[1])
	assert.Regexp(t, `^sieve\s+50\.0\s+60\.0\s+-\s+1\.200\s+-$`, lines[2])
	// geomean of 1.1 and 1.2; the ccd column has only fib.
	assert.Regexp(t, `^geomean\s+1\.149\s+20\.000$`, lines[3])
}

func TestParseReadsCPUTimeWhenReported(t *testing.T) {
	in := "BenchmarkFuel/prog=fib/variant=metered-2   10   110000000 ns/op   90000000 cpu-ns/op\n"
	samples, _, err := parse(strings.NewReader(in))
	require.NoError(t, err)
	assert.Equal(t, []float64{1.1e8}, samples[wallNs]["fib"]["metered"])
	assert.Equal(t, []float64{9e7}, samples[cpuNs]["fib"]["metered"])
}
