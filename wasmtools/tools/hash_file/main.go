// Command hash_file is a stock tool: it returns the SHA-256 of a file under
// an allowed dir.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"

	"github.com/edgeaip/edgeaip/wasmtools/sdk"
)

type params struct {
	Path string `json:"path"`
}

func main() {
	sdk.Run(func(p params) (any, error) {
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
	})
}
