// Command read_file is a stock tool: it returns the content of a file
// under an allowed dir, as UTF-8 text or, for binary content, base64.
package main

import (
	"encoding/base64"
	"io"
	"os"
	"unicode/utf8"

	"github.com/edgeaip/edgeaip/wasmtools/sdk/reactor"
)

type params struct {
	Path     string `json:"path"`
	MaxBytes int64  `json:"max_bytes"`
}

type result struct {
	Path      string `json:"path"`
	Size      int64  `json:"size"`
	Content   string `json:"content"`
	Encoding  string `json:"encoding"`
	Truncated bool   `json:"truncated"`
}

const defaultMaxBytes = 256 << 10

// In the reactor form, main is not run: the tool is registered during
// initialization, which the agent snapshots.
func init() { reactor.Handle(readFile) }

func main() {}

func readFile(p params) (any, error) {
	if p.MaxBytes <= 0 {
		p.MaxBytes = defaultMaxBytes
	}
	f, err := os.Open(p.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, p.MaxBytes))
	if err != nil {
		return nil, err
	}
	r := result{Path: p.Path, Size: fi.Size(), Content: string(b), Encoding: "utf-8", Truncated: fi.Size() > int64(len(b))}
	if !utf8.Valid(b) {
		r.Content, r.Encoding = base64.StdEncoding.EncodeToString(b), "base64"
	}
	return r, nil
}
