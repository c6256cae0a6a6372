package sandbox

import (
	"bytes"
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

// PruneCache removes from the compile cache what it has reason to remove,
// and logs each removal with its reason:
//   - the entry of a module that no loaded tool uses and whose file is
//     gone: every file it was loaded from is missing, or holds another
//     module now (it was replaced);
//   - an entry no tool has loaded for longer than the cache's max age
//     (WithCacheLimits);
//   - while the cache holds more than its max bytes, the entries of
//     modules no tool uses, the least recently loaded first;
//   - files a crash left half written, but for modules in use, whose
//     copies may be being written; and compiled code that no entry
//     records as its module's.
//
// An entry whose module is not loaded now but still in its file (a tool
// this start's policy refused, say) stays: the start after, with the
// policy corrected, finds it compiled. So does one that records no file
// (loaded from bytes), until it ages out. If a compile is under way (a
// snapshot tool being initialized, say), the sweep of compiled code waits
// for it to end, and PruneCache does not: what a compile writes must not
// be taken for code no entry records; errors of that later sweep are
// dropped, as the next PruneCache tries again.
//
// Call it only from the one process that uses the cache dir, with no Load
// under way, once it has loaded every tool it means to keep: an agent
// after loading its tools at start, and after a deploy replaces one. A
// cache shared by separate runs (aipctl tool run) must not be pruned.
func (s *Sandbox) PruneCache() error {
	if s.meteredDir == "" {
		return nil
	}
	return errors.Join(s.pruneEntries(), s.compiles.whenIdle(s.pruneCompiled))
}

// cacheEntry is what the compile cache holds for one module: its files in
// the metered dir (SHA.wasm, SHA.compiled, SHA.source), their size and
// that of the compiled code recorded as its, and when a tool last loaded
// it (their newest modification time: Load touches SHA.wasm).
type cacheEntry struct {
	sum      string
	files    []string
	bytes    int64
	loaded   time.Time
	compiled []string
}

func (s *Sandbox) sourcePath(sum string) string { return filepath.Join(s.meteredDir, sum+".source") }

// noteLoad records that the module sum was loaded now, from path if it is
// set: for max age, and so that PruneCache can tell when its file is
// gone. The caller holds s.mu, so Loads of one module record in turn.
func (s *Sandbox) noteLoad(sum, path string) {
	now := time.Now()
	os.Chtimes(s.meteredPath(sum), now, now) // not there yet until instrumented, which dates it
	if path == "" {
		return
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	sources := s.sources(sum)
	if !slices.Contains(sources, path) {
		atomicfile.Write(s.sourcePath(sum), []byte(strings.Join(append(sources, path), "\n")))
	}
}

// sources are the files the module sum was loaded from, as noteLoad
// recorded them.
func (s *Sandbox) sources(sum string) []string {
	b, err := os.ReadFile(s.sourcePath(sum))
	if err != nil || len(b) == 0 {
		return nil
	}
	return strings.Split(string(b), "\n")
}

// usedSums are the digests of the modules of the tools loaded now.
func (s *Sandbox) usedSums() map[string]bool {
	used := map[string]bool{}
	for _, t := range s.loadedTools() {
		used[t.sha256] = true
	}
	return used
}

// cacheEntries reads the metered dir: its entries, by module, and the
// files atomicfile left half written (.tmp-SHA.wasm-N).
func (s *Sandbox) cacheEntries() (entries []*cacheEntry, halfWritten []string, err error) {
	des, err := os.ReadDir(s.meteredDir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, err
	}
	bySum := map[string]*cacheEntry{}
	for _, de := range des {
		if strings.HasPrefix(de.Name(), ".tmp-") {
			halfWritten = append(halfWritten, de.Name())
			continue
		}
		info, err := de.Info()
		if err != nil {
			continue // removed meanwhile
		}
		sum, _, _ := strings.Cut(de.Name(), ".")
		e := bySum[sum]
		if e == nil {
			e = &cacheEntry{sum: sum, compiled: s.compiledRecord(sum)}
			bySum[sum] = e
			entries = append(entries, e)
		}
		e.files = append(e.files, de.Name())
		e.bytes += info.Size()
		if info.ModTime().After(e.loaded) {
			e.loaded = info.ModTime()
		}
	}
	for _, e := range entries {
		for _, f := range e.compiled {
			if info, err := os.Stat(filepath.Join(s.compiledDir, filepath.FromSlash(f))); err == nil {
				e.bytes += info.Size()
			}
		}
	}
	return entries, halfWritten, nil
}

// pruneEntries removes the metered dir's half-written files, and the
// entries of modules no loaded tool uses that are gone, too old, or over
// the cache's size, with their compiled code.
func (s *Sandbox) pruneEntries() error {
	entries, halfWritten, err := s.cacheEntries()
	if err != nil {
		return fmt.Errorf("sandbox: prune compile cache: %w", err)
	}
	var errs []error
	used := s.usedSums()
	for _, name := range halfWritten {
		// A loaded tool's may be being written now, in the background.
		if sum, _, _ := strings.Cut(strings.TrimPrefix(name, ".tmp-"), "."); !used[sum] {
			errs = append(errs, s.removeCacheFile(filepath.Join(s.meteredDir, name), "left half written (a crash while it was written)"))
		}
	}
	var total int64
	var unused []*cacheEntry
	reasons := map[*cacheEntry]string{}
	for _, e := range entries {
		total += e.bytes
		if used[e.sum] {
			continue
		}
		if why := s.staleReason(e); why != "" {
			reasons[e] = why
			total -= e.bytes
			continue
		}
		unused = append(unused, e)
	}
	slices.SortFunc(unused, func(a, b *cacheEntry) int { return a.loaded.Compare(b.loaded) })
	for _, e := range unused {
		if s.cfg.cacheMaxBytes <= 0 || total <= s.cfg.cacheMaxBytes {
			break
		}
		reasons[e] = fmt.Sprintf("the cache held %d bytes, more than its max of %d: this module was loaded least recently", total, s.cfg.cacheMaxBytes)
		total -= e.bytes
	}
	keptCode := map[string]bool{}
	for _, e := range entries {
		if reasons[e] == "" {
			for _, f := range e.compiled {
				keptCode[f] = true
			}
		}
	}
	for _, e := range entries {
		if why := reasons[e]; why != "" {
			errs = append(errs, s.removeEntry(e, why, keptCode))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sandbox: prune compile cache: %w", err)
	}
	return nil
}

// staleReason says why the entry e of a module no loaded tool uses should
// go, or "" if it should stay.
func (s *Sandbox) staleReason(e *cacheEntry) string {
	if sources := s.sources(e.sum); len(sources) > 0 && !slices.ContainsFunc(sources, func(p string) bool { return holds(p, e.sum) }) {
		return fmt.Sprintf("its module file is gone: %s no longer holds it", strings.Join(sources, ", "))
	}
	if age := time.Since(e.loaded); s.cfg.cacheMaxAge > 0 && age > s.cfg.cacheMaxAge {
		return fmt.Sprintf("no tool loaded it for %s, longer than the max age of %s", age.Round(time.Hour), s.cfg.cacheMaxAge)
	}
	return ""
}

// holds says whether the file at path is the module whose digest is sum.
func holds(path, sum string) bool {
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	got := sha256.Sum256(b)
	want, err := hex.DecodeString(sum)
	return err == nil && bytes.Equal(got[:], want)
}

// removeEntry removes the entry e, its compiled code but what keptCode
// holds (code a compile shared with a module that stays), and logs it.
func (s *Sandbox) removeEntry(e *cacheEntry, why string, keptCode map[string]bool) error {
	var errs []error
	for _, f := range e.compiled {
		if !keptCode[f] {
			errs = append(errs, ignoreMissing(os.Remove(filepath.Join(s.compiledDir, filepath.FromSlash(f)))))
		}
	}
	for _, f := range e.files {
		errs = append(errs, ignoreMissing(os.Remove(filepath.Join(s.meteredDir, f))))
	}
	err := errors.Join(errs...)
	s.cfg.log.Info("compile cache: module removed", "module", e.sum, "bytes", e.bytes, "reason", why, "err", err)
	return err
}

// removeCacheFile removes one file of the cache, and logs it.
func (s *Sandbox) removeCacheFile(path, why string) error {
	err := ignoreMissing(os.Remove(path))
	s.cfg.log.Info("compile cache: file removed", "file", path, "reason", why, "err", err)
	return err
}

func ignoreMissing(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// pruneCompiled removes from wazero's cache every file that no entry of
// the metered dir records as its module's code. No compile may be under
// way (compiling.whenIdle).
func (s *Sandbox) pruneCompiled() error {
	entries, _, err := s.cacheEntries()
	if err != nil {
		return fmt.Errorf("sandbox: prune compile cache: %w", err)
	}
	keep := map[string]bool{}
	for _, e := range entries {
		for _, f := range e.compiled {
			keep[f] = true
		}
	}
	var errs []error
	for _, f := range s.compiledFiles() {
		if !keep[f] {
			errs = append(errs, s.removeCacheFile(filepath.Join(s.compiledDir, filepath.FromSlash(f)),
				"compiled code that no module in the cache records as its own (its record was never written, or lost)"))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("sandbox: prune compile cache: %w", err)
	}
	return nil
}
