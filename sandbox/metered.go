package sandbox

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/edgeaip/edgeaip/wasmtools/meter"
)

// costModelDir names the cache directory of the current cost model. Code
// compiled under another model lives elsewhere and is never run.
var costModelDir = "cost-model-" + strings.ReplaceAll(meter.CostModelVersion, "/", "-")

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

// instrument returns wasm metered for fuel. Instrumenting a Go tool takes
// a quarter of a second, most of it validating, so the result is kept
// under the module's digest and later loads only read it back.
func (s *Sandbox) instrument(ctx context.Context, wasm []byte, sum string) ([]byte, error) {
	var path string
	if s.meteredDir != "" {
		path = filepath.Join(s.meteredDir, sum+".wasm")
		if b, err := os.ReadFile(path); err == nil {
			return b, nil
		}
	}
	metered, err := meter.Instrument(ctx, wasm, meter.Options{})
	if err != nil {
		return nil, err // meter names itself: "instrument: ..."
	}
	if path != "" {
		// A cache that cannot be written only costs the next start time.
		_ = writeFileAtomic(path, metered)
	}
	return metered, nil
}

// writeFileAtomic makes path hold data, whole or not at all, even across
// a power cut.
func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// sliceSize is the fuel between two safepoints: about 10 ms of guest work.
// wazero interprets on architectures it cannot compile for, tens of times
// slower per unit, so there the slice is smaller, for deadlines to be
// noticed as promptly. The fuel counted is the same either way.
func sliceSize() uint64 {
	switch runtime.GOARCH {
	case "amd64", "arm64":
		return meter.DefaultSliceSize
	}
	return meter.DefaultSliceSize / 50
}
