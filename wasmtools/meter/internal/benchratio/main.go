// Command benchratio reads the output of BenchmarkFuel (go test -bench)
// on stdin and prints, per program, the median time of each variant and
// the ratios metered/unmetered and closeOnContextDone/unmetered, with the
// geometric mean of each ratio over the programs and the program with the
// highest metered ratio. It does so for wall time
// (ns/op) and, when the benchmark reports it, for the CPU time of the
// thread that ran the guest (cpu-ns/op), which other load on the machine
// disturbs much less.
//
// A ratio is taken per run: the i-th metered sample over the i-th
// unmetered one. bench.sh runs the whole suite once per round, so the two
// come from the same round, close in time, and drift in the machine's load
// cancels out. The median of those is the ratio at one
// layout (one placement of the machine code, see meter.ShiftCode); a
// program's ratio is the geometric mean over its layouts, and the last
// column shows the lowest and highest of them. The medians in milliseconds
// pool every layout a variant ran at (closeOnContextDone runs at the
// first only).
package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
)

// Variant names, as in BenchmarkFuel's sub-benchmarks.
const (
	unmetered = "unmetered"
	metered   = "metered"
	ccd       = "closeOnContextDone"
)

// line matches "BenchmarkFuel/prog=<program>[/layout=<n>]/variant=<variant>-<procs>
// <n> <ns> ns/op [<ns> cpu-ns/op]". Output without layouts reads as layout 0.
var line = regexp.MustCompile(`^BenchmarkFuel/prog=([^/\s]+)(?:/layout=(\d+))?/variant=([^/\s-]+)(?:-\d+)?\s+\d+\s+([0-9.]+) ns/op(?:\s+([0-9.]+) cpu-ns/op)?`)

// Metrics, as the benchmark names them.
const (
	wallNs = "ns/op"
	cpuNs  = "cpu-ns/op"
)

// key names one sub-benchmark's samples of one metric.
type key struct{ metric, program, layout, variant string }

// samples holds the ns/op values read, and the programs and layouts in
// the order they first appear.
type samples struct {
	values   map[key][]float64
	programs []string
	layouts  []string
}

func (s *samples) add(k key, v float64) {
	if !slices.Contains(s.programs, k.program) {
		s.programs = append(s.programs, k.program)
	}
	if !slices.Contains(s.layouts, k.layout) {
		s.layouts = append(s.layouts, k.layout)
	}
	s.values[k] = append(s.values[k], v)
}

func (s *samples) has(metric string) bool {
	for k := range s.values {
		if k.metric == metric {
			return true
		}
	}
	return false
}

func main() {
	s, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchratio:", err)
		os.Exit(1)
	}
	if len(s.programs) == 0 {
		fmt.Fprintln(os.Stderr, "benchratio: no BenchmarkFuel results on stdin")
		os.Exit(1)
	}
	for _, metric := range []string{wallNs, cpuNs} {
		if s.has(metric) {
			fmt.Printf("%s\n", metric)
			report(os.Stdout, s, metric)
		}
	}
}

func parse(r io.Reader) (*samples, error) {
	s := &samples{values: map[key][]float64{}}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		layout := m[2]
		if layout == "" {
			layout = "0"
		}
		for metric, text := range map[string]string{wallNs: m[4], cpuNs: m[5]} {
			if text == "" {
				continue
			}
			v, err := strconv.ParseFloat(text, 64)
			if err != nil {
				return nil, fmt.Errorf("line %q: %w", sc.Text(), err)
			}
			s.add(key{metric, m[1], layout, m[3]}, v)
		}
	}
	return s, sc.Err()
}

func report(w io.Writer, s *samples, metric string) {
	const format = "%-10s %14s %14s %14s %10s %10s %20s\n"
	fmt.Fprintf(w, format, "program", "unmetered ms", "metered ms", "ccd ms", "metered/x", "ccd/x", "metered/x by layout")
	var logMetered, logCCD []float64
	worst, worstRatio := "", math.Inf(-1)
	for _, p := range s.programs {
		rm, lo, hi := s.ratio(metric, p, metered)
		rc, _, _ := s.ratio(metric, p, ccd)
		spread := "-"
		if !math.IsNaN(rm) {
			spread = ratio(lo) + "-" + ratio(hi)
		}
		fmt.Fprintf(w, format, p, ms(median(s.all(metric, p, unmetered))), ms(median(s.all(metric, p, metered))),
			ms(median(s.all(metric, p, ccd))), ratio(rm), ratio(rc), spread)
		if rm > worstRatio {
			worst, worstRatio = p, rm
		}
		logMetered = appendLog(logMetered, rm)
		logCCD = appendLog(logCCD, rc)
	}
	fmt.Fprintf(w, format, "geomean", "", "", "", ratio(geomean(logMetered)), ratio(geomean(logCCD)), "")
	if worst != "" {
		fmt.Fprintf(w, "worst metered/x: %s %s\n", worst, ratio(worstRatio))
	}
}

// ratio is variant over unmetered for program p: the geometric mean over
// layouts of the paired ratio at each, with the lowest and highest.
func (s *samples) ratio(metric, p, variant string) (r, lo, hi float64) {
	var logs []float64
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, l := range s.layouts {
		rl := pairedRatio(s.values[key{metric, p, l, variant}], s.values[key{metric, p, l, unmetered}])
		if math.IsNaN(rl) {
			continue
		}
		logs = append(logs, math.Log(rl))
		lo, hi = min(lo, rl), max(hi, rl)
	}
	return geomean(logs), lo, hi
}

// all is every sample of one variant of p, at every layout.
func (s *samples) all(metric, p, variant string) []float64 {
	var out []float64
	for _, l := range s.layouts {
		out = append(out, s.values[key{metric, p, l, variant}]...)
	}
	return out
}

// pairedRatio is the median of a[i]/b[i] over the runs both have.
func pairedRatio(a, b []float64) float64 {
	n := min(len(a), len(b))
	if n == 0 {
		return math.NaN()
	}
	r := make([]float64, n)
	for i := range n {
		r[i] = a[i] / b[i]
	}
	return median(r)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func appendLog(logs []float64, r float64) []float64 {
	if math.IsNaN(r) {
		return logs
	}
	return append(logs, math.Log(r))
}

func geomean(logs []float64) float64 {
	if len(logs) == 0 {
		return math.NaN()
	}
	sum := 0.0
	for _, l := range logs {
		sum += l
	}
	return math.Exp(sum / float64(len(logs)))
}

func ms(ns float64) string {
	if math.IsNaN(ns) {
		return "-"
	}
	return strconv.FormatFloat(ns/1e6, 'f', 1, 64)
}

func ratio(r float64) string {
	if math.IsNaN(r) {
		return "-"
	}
	return strconv.FormatFloat(r, 'f', 3, 64)
}
