package sandbox

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/edgeaip/edgeaip/wasmtools/meter"
)

// The compile cache, under the directory Config.WithCacheDir names:
//
//	DIR/cost-model-V/           V is meter.CostModelVersion
//	  metered/SHA.wasm          the instrumented copy of the module whose digest is SHA, sealed
//	  compiled/...              wazero's compilation cache

// costModelPrefix starts the name of every cost model's cache directory.
const costModelPrefix = "cost-model-"

// costModelDir names the cache directory of the current cost model. Code
// compiled under another model lives elsewhere and is never run.
var costModelDir = costModelPrefix + strings.ReplaceAll(meter.CostModelVersion, "/", "-")

// openCacheDir prepares DIR/cost-model-V, mode 0700: whoever can write
// there chooses the machine code this process runs.
func openCacheDir(dir string) (string, error) {
	sub := filepath.Join(dir, costModelDir)
	for _, d := range []string{dir, sub} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return "", fmt.Errorf("sandbox: compile cache: %w", err)
		}
		// MkdirAll leaves an existing directory's mode alone.
		if err := os.Chmod(d, 0o700); err != nil {
			return "", fmt.Errorf("sandbox: compile cache: %w", err)
		}
	}
	return sub, nil
}

// sealName names the custom section that ends an instrumented copy on
// disk. It holds the sha256 of the bytes before it, so that a copy damaged
// on disk is found even where it still parses: a flipped byte could
// otherwise change what a tool does, or take its fuel meter out. A custom
// section keeps the file a module that wasm tools can read.
const sealName = "aip.metered.sha256"

// sealHead is the custom section's id, size and name; the digest follows.
var sealHead = append([]byte{0, byte(1 + len(sealName) + sha256.Size), byte(len(sealName))}, sealName...)

// seal appends metered's digest to it, as a custom section.
func seal(metered []byte) []byte {
	sum := sha256.Sum256(metered)
	out := make([]byte, 0, len(metered)+len(sealHead)+len(sum))
	return append(append(append(out, metered...), sealHead...), sum[:]...)
}

// unseal returns the instrumented module b holds, if its digest matches.
func unseal(b []byte) ([]byte, error) {
	n := len(b) - len(sealHead) - sha256.Size
	if n < 0 || !bytes.Equal(b[n:n+len(sealHead)], sealHead) {
		return nil, errors.New("damaged: it does not end with its digest")
	}
	if sum := sha256.Sum256(b[:n]); !bytes.Equal(sum[:], b[n+len(sealHead):]) {
		return nil, errors.New("damaged: its digest does not match its bytes")
	}
	return b[:n], nil
}

// readMetered reads and unseals the instrumented copy at path.
func readMetered(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read instrumented module: %w", err)
	}
	m, err := unseal(b)
	if err != nil {
		return nil, fmt.Errorf("instrumented module %s: %w", path, err)
	}
	return m, nil
}

func (s *Sandbox) meteredPath(sum string) string { return filepath.Join(s.meteredDir, sum+".wasm") }
