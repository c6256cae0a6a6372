// Command goprog is a deterministic mixed workload compiled with
// GOOS=wasip1 GOARCH=wasm, used as a real Go program by the fuel tests and
// benchmarks in wasmtools/meter. It builds records, sorts them, encodes
// them as JSON, compresses and decompresses the JSON, hashes everything,
// and prints one checksum line per stage.
//
// Usage: goprog [records] (default 2000)
package main

import (
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
)

type record struct {
	ID    int               `json:"id"`
	Name  string            `json:"name"`
	Score float64           `json:"score"`
	Tags  []string          `json:"tags"`
	Attrs map[string]string `json:"attrs"`
}

func main() {
	n := 2000
	if len(os.Args) > 1 {
		v, err := strconv.Atoi(os.Args[1])
		if err != nil || v < 1 {
			fmt.Fprintf(os.Stderr, "goprog: bad record count %q\n", os.Args[1])
			os.Exit(2)
		}
		n = v
	}
	records := build(n)
	sort.Slice(records, func(i, j int) bool {
		if records[i].Score != records[j].Score {
			return records[i].Score > records[j].Score
		}
		return records[i].Name < records[j].Name
	})
	fmt.Printf("sorted: first=%s last=%s\n", records[0].Name, records[len(records)-1].Name)

	encoded, err := json.Marshal(records)
	check(err)
	fmt.Printf("json: %d bytes sha256=%x\n", len(encoded), sha256.Sum256(encoded))

	compressed := deflate(encoded)
	fmt.Printf("deflate: %d bytes\n", len(compressed))
	restored := inflate(compressed)
	var decoded []record
	check(json.Unmarshal(restored, &decoded))
	fmt.Printf("roundtrip: %d records equal=%t\n", len(decoded), bytes.Equal(restored, encoded))
	fmt.Printf("words: %d distinct\n", countWords(decoded))
}

// build makes n records from a linear congruential generator, so every run
// and every engine sees the same data.
func build(n int) []record {
	words := strings.Fields("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon phi chi psi omega")
	state := uint32(12345)
	next := func() uint32 { state = state*1103515245 + 12345; return state >> 8 }
	out := make([]record, n)
	for i := range out {
		r := record{ID: i, Score: float64(next()%10000) / 100, Attrs: map[string]string{}}
		r.Name = words[next()%uint32(len(words))] + "-" + strconv.Itoa(int(next()%1000))
		for range next()%5 + 1 {
			r.Tags = append(r.Tags, words[next()%uint32(len(words))])
		}
		for range next() % 4 {
			r.Attrs[words[next()%uint32(len(words))]] = strconv.FormatUint(uint64(next()), 36)
		}
		out[i] = r
	}
	return out
}

func deflate(b []byte) []byte {
	var buf bytes.Buffer
	w, err := flate.NewWriter(&buf, flate.DefaultCompression)
	check(err)
	_, err = w.Write(b)
	check(err)
	check(w.Close())
	return buf.Bytes()
}

func inflate(b []byte) []byte {
	out, err := io.ReadAll(flate.NewReader(bytes.NewReader(b)))
	check(err)
	return out
}

func countWords(rs []record) int {
	seen := map[string]int{}
	for _, r := range rs {
		for _, t := range r.Tags {
			seen[t]++
		}
		for k, v := range r.Attrs {
			seen[k+"="+v]++
		}
	}
	return len(seen)
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "goprog:", err)
		os.Exit(1)
	}
}
