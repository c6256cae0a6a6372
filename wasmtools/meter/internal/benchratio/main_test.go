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
	s, err := parse(strings.NewReader(in))
	require.NoError(t, err)
	assert.Equal(t, []string{"fib", "sieve"}, s.programs)
	assert.Equal(t, []string{"0"}, s.layouts, "output without layouts is one layout")

	assert.False(t, s.has(cpuNs), "no cpu-ns/op in the input")
	var out bytes.Buffer
	report(&out, s, wallNs)
	lines := strings.Split(out.String(), "\n")
	assert.Regexp(t, `^fib\s+150\.0\s+165\.0\s+3000\.0\s+1\.100\s+20\.000\s+1\.100-1\.100$`, lines[1])
	assert.Regexp(t, `^sieve\s+50\.0\s+60\.0\s+-\s+1\.200\s+-\s+1\.200-1\.200$`, lines[2])
	// geomean of 1.1 and 1.2; the ccd column has only fib.
	assert.Regexp(t, `^geomean\s+1\.149\s+20\.000\s*$`, lines[3])
	assert.Equal(t, "worst metered/x: sieve 1.200", lines[4])
}

func TestRatiosArePairedByRound(t *testing.T) {
	// Round ratios 2.2 and 0.55: their median is 1.375, while the ratio of
	// the medians would be 1.1.
	in := `BenchmarkFuel/prog=fib/layout=0/variant=unmetered-2   10   100000000 ns/op
BenchmarkFuel/prog=fib/layout=0/variant=metered-2     10   220000000 ns/op
BenchmarkFuel/prog=fib/layout=0/variant=unmetered-2   10   200000000 ns/op
BenchmarkFuel/prog=fib/layout=0/variant=metered-2     10   110000000 ns/op
`
	s, err := parse(strings.NewReader(in))
	require.NoError(t, err)
	r, _, _ := s.ratio(wallNs, "fib", metered)
	assert.InDelta(t, 1.375, r, 1e-9)
}

func TestReportAveragesOverLayouts(t *testing.T) {
	// Layout ratios 1.44 and 1.0, geomean 1.2; pooled, the medians would
	// give 133.5/125 = 1.068. closeOnContextDone runs at layout 0 only.
	in := `BenchmarkFuel/prog=fib/layout=0/variant=unmetered-2   10   100000000 ns/op
BenchmarkFuel/prog=fib/layout=0/variant=metered-2     10   144000000 ns/op
BenchmarkFuel/prog=fib/layout=0/variant=closeOnContextDone-2  1  1000000000 ns/op
BenchmarkFuel/prog=fib/layout=1/variant=unmetered-2   10   150000000 ns/op
BenchmarkFuel/prog=fib/layout=1/variant=metered-2     10   123000000 ns/op
BenchmarkFuel/prog=fib/layout=1/variant=unmetered-2   10   150000000 ns/op
BenchmarkFuel/prog=fib/layout=1/variant=metered-2     10   177000000 ns/op
`
	s, err := parse(strings.NewReader(in))
	require.NoError(t, err)
	assert.Equal(t, []string{"0", "1"}, s.layouts)
	r, lo, hi := s.ratio(wallNs, "fib", metered)
	assert.InDelta(t, 1.2, r, 1e-9, "geomean of 1.44 and 1.0")
	assert.InDelta(t, 1.0, lo, 1e-9)
	assert.InDelta(t, 1.44, hi, 1e-9)
	rc, _, _ := s.ratio(wallNs, "fib", ccd)
	assert.InDelta(t, 10.0, rc, 1e-9, "layouts without the variant are left out")
	var out bytes.Buffer
	report(&out, s, wallNs)
	assert.Regexp(t, `(?m)^fib\s+150\.0\s+144\.0\s+1000\.0\s+1\.200\s+10\.000\s+1\.000-1\.440$`, out.String())
}

func TestParseReadsCPUTimeWhenReported(t *testing.T) {
	in := "BenchmarkFuel/prog=fib/layout=2/variant=metered-2   10   110000000 ns/op   90000000 cpu-ns/op\n"
	s, err := parse(strings.NewReader(in))
	require.NoError(t, err)
	assert.Equal(t, []float64{1.1e8}, s.values[key{wallNs, "fib", "2", metered}])
	assert.Equal(t, []float64{9e7}, s.values[key{cpuNs, "fib", "2", metered}])
}
