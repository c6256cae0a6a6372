// Command gostd runs one workload of Go's standard library, compiled with
// GOOS=wasip1 GOARCH=wasm, for the fuel benchmark in wasmtools/meter: real
// library code nobody tuned the meter for. The input is generated from a
// fixed seed, so every run does the same work, and the output is one
// checksum line.
//
// Usage: gostd WORKLOAD [size]
//
//	flate    compress/flate: deflate and inflate size KiB of log text
//	sha256   crypto/sha256 and crypto/aes (CTR): size KiB, hashed and encrypted
//	json     encoding/json: encode and decode size records
//	regexp   regexp: six patterns over size KiB of log lines
//	xml      encoding/xml: encode size records, then parse them as tokens and into structs
package main

import (
	"bytes"
	"compress/flate"
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"strings"
)

type workload struct {
	size int // default size
	run  func(n int) (string, error)
}

var workloads = map[string]workload{
	"flate":  {384, runFlate},
	"sha256": {1024, runSHA256},
	"json":   {800, runJSON},
	"regexp": {160, runRegexp},
	"xml":    {400, runXML},
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: gostd flate|sha256|json|regexp|xml [size]")
		os.Exit(2)
	}
	w, ok := workloads[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "gostd: unknown workload %q\n", os.Args[1])
		os.Exit(2)
	}
	n := w.size
	if len(os.Args) > 2 {
		v, err := strconv.Atoi(os.Args[2])
		if err != nil || v < 1 {
			fmt.Fprintf(os.Stderr, "gostd: bad size %q\n", os.Args[2])
			os.Exit(2)
		}
		n = v
	}
	out, err := w.run(n)
	if err != nil {
		fmt.Fprintf(os.Stderr, "gostd %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
	fmt.Printf("%s %d: %s\n", os.Args[1], n, out)
}

var words = strings.Fields("alpha beta gamma delta kiosk sensor error warning info debug " +
	"temperature humidity door open closed user login logout payment card ok failed " +
	"retry timeout network cache disk memory cpu battery")

// logText returns about kib KiB of log-like lines.
func logText(kib int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	var b bytes.Buffer
	for b.Len() < kib<<10 {
		fmt.Fprintf(&b, "2026-11-%02d %02d:%02d:%02d host%d", 1+rng.IntN(28), rng.IntN(24), rng.IntN(60), rng.IntN(60), rng.IntN(16))
		for range 3 + rng.IntN(8) {
			b.WriteByte(' ')
			b.WriteString(words[rng.IntN(len(words))])
		}
		fmt.Fprintf(&b, " id=%d\n", rng.IntN(100000))
	}
	return b.Bytes()
}

func runFlate(kib int) (string, error) {
	text := logText(kib)
	var z bytes.Buffer
	w, err := flate.NewWriter(&z, flate.DefaultCompression)
	if err != nil {
		return "", err
	}
	if _, err := w.Write(text); err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	back, err := io.ReadAll(flate.NewReader(bytes.NewReader(z.Bytes())))
	if err != nil {
		return "", err
	}
	if !bytes.Equal(back, text) {
		return "", fmt.Errorf("inflate gave %d bytes, not the %d deflated", len(back), len(text))
	}
	return fmt.Sprintf("%d -> %d bytes, crc %08x", len(text), z.Len(), crc32.ChecksumIEEE(z.Bytes())), nil
}

func runSHA256(kib int) (string, error) {
	buf := make([]byte, kib<<10)
	for i := range buf {
		buf[i] = byte(i*131 + i>>8)
	}
	sum := sha256.Sum256(buf)
	block, err := aes.NewCipher(sum[:16])
	if err != nil {
		return "", err
	}
	cipher.NewCTR(block, sum[16:]).XORKeyStream(buf, buf)
	return fmt.Sprintf("sha256 %x, after aes-ctr %x", sum[:8], sha256.Sum256(buf)), nil
}

type record struct {
	ID     int               `json:"id"`
	Name   string            `json:"name"`
	Score  float64           `json:"score"`
	Tags   []string          `json:"tags"`
	Attrs  map[string]string `json:"attrs"`
	Active bool              `json:"active"`
}

func records(n int) []record {
	rng := rand.New(rand.NewPCG(3, 4))
	rs := make([]record, n)
	for i := range rs {
		rs[i] = record{ID: i, Name: words[rng.IntN(len(words))] + strconv.Itoa(i), Score: rng.Float64() * 1000,
			Tags: []string{words[rng.IntN(len(words))], words[rng.IntN(len(words))]}, Attrs: map[string]string{
				"site": words[rng.IntN(len(words))], "zone": strconv.Itoa(rng.IntN(50))}, Active: rng.IntN(2) == 0}
	}
	return rs
}

func runJSON(n int) (string, error) {
	text, err := json.Marshal(records(n))
	if err != nil {
		return "", err
	}
	var back []record
	if err := json.Unmarshal(text, &back); err != nil {
		return "", err
	}
	var generic []map[string]any
	if err := json.Unmarshal(text, &generic); err != nil {
		return "", err
	}
	again, err := json.MarshalIndent(generic, "", "  ")
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%d bytes, %d records, indented %d bytes, crc %08x", len(text), len(back), len(again), crc32.ChecksumIEEE(again)), nil
}

func runRegexp(kib int) (string, error) {
	patterns := []string{`error`, `host1[0-5] `, `id=9\d{4}$`, `(?i)timeout.*retry`, `\d\d:\d\d:5\d`, `^2026-11-0\d .*(door|card) (open|failed)`}
	var res []*regexp.Regexp
	for _, p := range patterns {
		re, err := regexp.Compile(p)
		if err != nil {
			return "", err
		}
		res = append(res, re)
	}
	counts := make([]int, len(res))
	for line := range bytes.Lines(logText(kib)) {
		line = bytes.TrimSuffix(line, []byte("\n"))
		for i, re := range res {
			if re.Match(line) {
				counts[i]++
			}
		}
	}
	return fmt.Sprint(counts), nil
}

type item struct {
	XMLName xml.Name `xml:"item"`
	ID      int      `xml:"id,attr"`
	Name    string   `xml:"name"`
	Score   float64  `xml:"score"`
	Tags    []string `xml:"tags>tag"`
	Active  bool     `xml:"active,attr"`
	Note    string   `xml:",comment"`
}

type feed struct {
	XMLName xml.Name `xml:"feed"`
	Items   []item   `xml:"item"`
}

func runXML(n int) (string, error) {
	var f feed
	for _, r := range records(n) {
		f.Items = append(f.Items, item{ID: r.ID, Name: r.Name, Score: r.Score, Tags: r.Tags, Active: r.Active,
			Note: " site " + r.Attrs["site"] + " "})
	}
	text, err := xml.MarshalIndent(f, "", " ")
	if err != nil {
		return "", err
	}
	tokens := 0
	d := xml.NewDecoder(bytes.NewReader(text))
	for {
		_, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", err
		}
		tokens++
	}
	var back feed
	if err := xml.Unmarshal(text, &back); err != nil {
		return "", err
	}
	return fmt.Sprintf("%d bytes, %d tokens, %d items, crc %08x", len(text), tokens, len(back.Items), crc32.ChecksumIEEE(text)), nil
}
