// Command list_dir is a stock tool: it lists a directory under an allowed
// dir.
package main

import (
	"os"

	"github.com/edgeaip/edgeaip/wasmtools/sdk/reactor"
)

type params struct {
	Path string `json:"path"`
}

type entry struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Size int64  `json:"size"`
}

// In the reactor form, main is not run: the tool is registered during
// initialization, which the agent snapshots.
func init() { reactor.Handle(listDir) }

func main() {}

func listDir(p params) (any, error) {
	des, err := os.ReadDir(p.Path)
	if err != nil {
		return nil, err
	}
	entries := make([]entry, 0, len(des))
	for _, de := range des {
		e := entry{Name: de.Name(), Type: kind(de.Type())}
		if fi, err := de.Info(); err == nil && de.Type().IsRegular() {
			e.Size = fi.Size()
		}
		entries = append(entries, e)
	}
	return map[string]any{"path": p.Path, "entries": entries}, nil
}

func kind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "dir"
	case m.IsRegular():
		return "file"
	case m&os.ModeSymlink != 0:
		return "symlink"
	}
	return "other"
}
