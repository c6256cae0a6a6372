// Command write_file is a stock tool: it writes or appends to a file under
// an allowed dir.
package main

import (
	"encoding/base64"
	"fmt"
	"os"

	"github.com/edgeaip/edgeaip/wasmtools/sdk/reactor"
)

type params struct {
	Path     string `json:"path"`
	Content  string `json:"content"`
	Encoding string `json:"encoding"`
	Append   bool   `json:"append"`
}

// In the reactor form, main is not run: the tool is registered during
// initialization, which the agent snapshots.
func init() { reactor.Handle(writeFile) }

func main() {}

func writeFile(p params) (any, error) {
	data := []byte(p.Content)
	switch p.Encoding {
	case "", "utf-8":
	case "base64":
		var err error
		if data, err = base64.StdEncoding.DecodeString(p.Content); err != nil {
			return nil, fmt.Errorf("parameter \"content\": %w", err)
		}
	default:
		return nil, fmt.Errorf("parameter \"encoding\": want utf-8 or base64, got %q", p.Encoding)
	}
	flags := os.O_WRONLY | os.O_CREATE | os.O_TRUNC
	if p.Append {
		flags = os.O_WRONLY | os.O_CREATE | os.O_APPEND
	}
	f, err := os.OpenFile(p.Path, flags, 0o644)
	if err != nil {
		return nil, err
	}
	n, err := f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"path": p.Path, "bytes_written": n}, nil
}
