// Command benchratio reads the output of BenchmarkFuel (go test -bench)
// on stdin and prints, per program, the median time of each variant and
// the median ratios metered/unmetered and closeOnContextDone/unmetered,
// with the geometric mean of each ratio over the programs. It does so for
// wall time (ns/op) and, when the benchmark reports it, for the CPU time
// of the thread that ran the guest (cpu-ns/op), which other load on the
// machine disturbs much less.
//
// A ratio is taken per run: the i-th metered sample over the i-th
// unmetered one. With -count, go test runs every sub-benchmark once per
// round, so the two come from the same round, close in time, and drift in
// the machine's load cancels out.
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

// line matches "BenchmarkFuel/prog=<program>/variant=<variant>-<procs>
// <n> <ns> ns/op [<ns> cpu-ns/op]".
var line = regexp.MustCompile(`^BenchmarkFuel/prog=([^/\s]+)/variant=([^/\s-]+)(?:-\d+)?\s+\d+\s+([0-9.]+) ns/op(?:\s+([0-9.]+) cpu-ns/op)?`)

// Metrics, as the benchmark names them.
const (
	wallNs = "ns/op"
	cpuNs  = "cpu-ns/op"
)

// samples holds ns/op values by metric, program and variant.
type samples map[string]map[string]map[string][]float64

func (s samples) add(metric, program, variant string, v float64) {
	if s[metric] == nil {
		s[metric] = map[string]map[string][]float64{}
	}
	if s[metric][program] == nil {
		s[metric][program] = map[string][]float64{}
	}
	s[metric][program][variant] = append(s[metric][program][variant], v)
}

func main() {
	samples, order, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchratio:", err)
		os.Exit(1)
	}
	if len(order) == 0 {
		fmt.Fprintln(os.Stderr, "benchratio: no BenchmarkFuel results on stdin")
		os.Exit(1)
	}
	for _, metric := range []string{wallNs, cpuNs} {
		if samples[metric] != nil {
			fmt.Printf("%s\n", metric)
			report(os.Stdout, samples[metric], order)
		}
	}
}

// parse returns the samples, and the programs in the order they first
// appear.
func parse(r io.Reader) (samples, []string, error) {
	all := samples{}
	var order []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		if !slices.Contains(order, m[1]) {
			order = append(order, m[1])
		}
		for metric, text := range map[string]string{wallNs: m[3], cpuNs: m[4]} {
			if text == "" {
				continue
			}
			v, err := strconv.ParseFloat(text, 64)
			if err != nil {
				return nil, nil, fmt.Errorf("line %q: %w", sc.Text(), err)
			}
			all.add(metric, m[1], m[2], v)
		}
	}
	return all, order, sc.Err()
}

func report(w io.Writer, samples map[string]map[string][]float64, order []string) {
	fmt.Fprintf(w, "%-10s %14s %14s %14s %10s %10s\n", "program", "unmetered ms", "metered ms", "ccd ms", "metered/x", "ccd/x")
	var logMetered, logCCD []float64
	for _, p := range order {
		v := samples[p]
		rm := pairedRatio(v[metered], v[unmetered])
		rc := pairedRatio(v[ccd], v[unmetered])
		fmt.Fprintf(w, "%-10s %14s %14s %14s %10s %10s\n", p,
			ms(median(v[unmetered])), ms(median(v[metered])), ms(median(v[ccd])), ratio(rm), ratio(rc))
		logMetered = appendLog(logMetered, rm)
		logCCD = appendLog(logCCD, rc)
	}
	fmt.Fprintf(w, "%-10s %14s %14s %14s %10s %10s\n", "geomean", "", "", "", ratio(geomean(logMetered)), ratio(geomean(logCCD)))
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
