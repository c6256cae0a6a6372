package toolbox

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/edgeaip/edgeaip/internal/atomicfile"
)

// stagedFor is how long a module staged and referenced by no rollout is
// kept: long enough for the revision it was staged for to be applied.
const stagedFor = 24 * time.Hour

// moduleStore keeps the modules of rollouts, and the tools deployed with
// force in place of a rollout's, as DIR/SHA256.wasm: named for their
// content, so that two revisions or two rollouts that share a module keep
// one copy, a revision's modules can be kept before it is applied, and a
// rollback finds the previous revision's modules by their digests. A
// file's modification time is when it was last staged.
type moduleStore struct{ dir string }

// path is where the module of digest sha is kept.
func (s moduleStore) path(sha string) string { return filepath.Join(s.dir, sha+".wasm") }

// has reports whether the module of digest sha is kept.
func (s moduleStore) has(sha string) bool {
	_, err := os.Stat(s.path(sha))
	return err == nil
}

// keep keeps wasm, whose digest is sha. A module kept already is kept
// again as staged now (already true).
func (s moduleStore) keep(sha string, wasm []byte) (already bool, err error) {
	now := time.Now()
	if err := os.Chtimes(s.path(sha), now, now); err == nil {
		return true, nil
	}
	if err := atomicfile.Write(s.path(sha), wasm); err != nil {
		return false, fmt.Errorf("keep module %s: %w", sha, err)
	}
	return false, nil
}

// read returns the module of digest sha, checked against it.
func (s moduleStore) read(sha string) ([]byte, error) {
	wasm, err := os.ReadFile(s.path(sha))
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", sha, err)
	}
	if sum := sha256.Sum256(wasm); hex.EncodeToString(sum[:]) != sha {
		return nil, fmt.Errorf("module %s: the kept file's digest is %x: it was altered on this device", sha, sum)
	}
	return wasm, nil
}

// list returns the digests of the modules kept, sorted.
func (s moduleStore) list() ([]string, error) {
	entries, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("kept modules: %w", err)
	}
	var shas []string
	for _, e := range entries {
		if sha, ok := strings.CutSuffix(e.Name(), ".wasm"); ok && e.Type().IsRegular() && len(sha) == sha256.Size*2 {
			shas = append(shas, sha)
		}
	}
	slices.Sort(shas)
	return shas, nil
}

// collect removes the modules that inUse does not hold and that were not
// staged since stagedBefore, and returns their digests.
func (s moduleStore) collect(inUse map[string]bool, stagedBefore time.Time) ([]string, error) {
	shas, err := s.list()
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, sha := range shas {
		info, err := os.Stat(s.path(sha))
		if err != nil || inUse[sha] || info.ModTime().After(stagedBefore) {
			continue
		}
		if err := os.Remove(s.path(sha)); err != nil {
			return removed, fmt.Errorf("remove module %s: %w", sha, err)
		}
		removed = append(removed, sha)
	}
	return removed, nil
}
