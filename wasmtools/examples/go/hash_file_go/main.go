// Command hash_file_go is an example tool written in Go with the SDK, in
// the reactor form: it returns the SHA-256 of a file under an allowed dir,
// as the stock tool hash_file (written in C) does. It is what the tests
// and benchmarks of a Go module run (snapshot starts, the instrument
// queue, cold starts, other architectures): a Go tool is some 3.7 MB, and
// its runtime's start-up is what snapshots save. make build builds it
// into bin/examples.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"

	"github.com/edgeaip/edgeaip/wasmtools/sdk/reactor"
)

type params struct {
	Path string `json:"path"`
}

// In the reactor form, main is not run: the tool is registered during
// initialization, which the agent snapshots.
func init() { reactor.Handle(hashFile) }

func main() {}

func hashFile(p params) (any, error) {
	f, err := os.Open(p.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return nil, err
	}
	return map[string]any{"path": p.Path, "sha256": hex.EncodeToString(h.Sum(nil)), "size": n}, nil
}
