package sandbox

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/edgeaip/edgeaip/internal/atomicfile"
	"github.com/edgeaip/edgeaip/wasmtools/meter"
)

// costModelPrefix starts the name of every cost model's cache directory.
const costModelPrefix = "cost-model-"

// costModelDir names the cache directory of the current cost model. Code
// compiled under another model lives elsewhere and is never run.
var costModelDir = costModelPrefix + strings.ReplaceAll(meter.CostModelVersion, "/", "-")

// openCacheDir prepares DIR/cost-model-V, mode 0700: whoever can write
// there chooses the machine code this process runs. The directories of
// other cost models are removed: their code can never run again, and the
// flash of a device is small.
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
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("sandbox: compile cache: %w", err)
	}
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), costModelPrefix) && e.Name() != costModelDir {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return "", fmt.Errorf("sandbox: compile cache: remove a retired cost model's: %w", err)
			}
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

func (s *Sandbox) compiledRecordPath(sum string) string {
	return filepath.Join(s.meteredDir, sum+".compiled")
}

// compiledFiles lists the files in wazero's cache, as paths relative to
// it. A cache that cannot be read lists what could be.
func (s *Sandbox) compiledFiles() []string {
	var files []string
	filepath.WalkDir(s.compiledDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			rel, _ := filepath.Rel(s.compiledDir, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	return files
}

// compiledRecord lists the files of wazero's cache recorded as the module
// sum's compiled code.
func (s *Sandbox) compiledRecord(sum string) []string {
	b, err := os.ReadFile(s.compiledRecordPath(sum))
	if err != nil {
		return nil
	}
	return slices.DeleteFunc(strings.Split(string(b), "\n"), func(f string) bool { return !filepath.IsLocal(f) })
}

// recordCompiled records as the module sum's code the files that wazero's
// cache holds now and did not before. wazero names an entry by a digest
// of its own (of the bytes, wazero's version and the CPU's features),
// which is not ours to compute; compiles are one at a time in each lane,
// so what appeared during one is its code, and that of a compile of the
// other lane that ended meanwhile, which is then kept while either module
// is loaded (RATIONALE.md). Without a record, or if it cannot
// be written, the next PruneCache removes the entry, and the next call
// compiles it again and records it.
func (s *Sandbox) recordCompiled(sum string, before []string) {
	record := s.compiledRecord(sum)
	n := len(record)
	for _, f := range s.compiledFiles() {
		if !slices.Contains(before, f) && !slices.Contains(record, f) {
			record = append(record, f)
		}
	}
	if len(record) > n {
		atomicfile.Write(s.compiledRecordPath(sum), []byte(strings.Join(record, "\n")))
	}
}
