// Package scaffold writes the directory of a new tool: its source in the
// SDK's current form (a reactor, which agents initialize once and start
// each call from a snapshot of), a manifest with its input schema filled
// in, a Makefile that builds the module and packs the manifest into it,
// and a README. The tool greets someone, so that it runs as written.
//
// The module github.com/edgeaip/edgeaip is not published, so a Go tool
// gets a copy of the SDK (wasmtools.SDKSource) in edgeaip-sdk/, which its
// go.mod replaces the module with: it builds with nothing but a Go
// toolchain, and, once the module is published, drops the copy and the
// replace line and imports the same packages by the same paths. A copy
// rather than a vendored or rewritten one keeps the tool's source as it
// will stay.
package scaffold

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"go/build/constraint"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"text/template"

	"github.com/edgeaip/edgeaip/wasmtools"
	"github.com/edgeaip/edgeaip/wasmtools/manifest"
)

// Lang is the language of a new tool.
type Lang string

// The languages a tool can be written in.
const (
	Go   Lang = "go"
	C    Lang = "c"
	Rust Lang = "rust"
)

// Langs lists the languages, the default first.
func Langs() []Lang { return []Lang{Go, C, Rust} }

//go:embed templates
var templates embed.FS

// sdkDir is where a Go tool's copy of the SDK goes, and module the path
// its go.mod replaces with it.
const (
	sdkDir = "edgeaip-sdk"
	module = "github.com/edgeaip/edgeaip"
)

// params are what the templates are filled in with.
type params struct {
	Name string
	// GoVersion is the Go release the SDK is built with, 1.N.0, and
	// GoMinor its language version, 1.N.
	GoVersion, GoMinor string
	// Memory is the manifest's memory limit: a Go module starts the Go
	// runtime, which takes more than C's.
	Memory string
}

// ArgumentError is an error of Write's about its arguments: a name, a
// language or a directory it does not take. Its other errors are failures
// to write.
type ArgumentError struct{ Err error }

func (e *ArgumentError) Error() string { return e.Err.Error() }
func (e *ArgumentError) Unwrap() error { return e.Err }

// Write writes the directory dir of a new tool called name, in lang, and
// returns the files it wrote, relative to dir, sorted. dir must not exist,
// or be empty; it appears whole or not at all. name must be a valid tool
// name, as a manifest's.
func Write(dir, name string, lang Lang) ([]string, error) {
	if err := checkName(name); err != nil {
		return nil, &ArgumentError{err}
	}
	if !slices.Contains(Langs(), lang) {
		return nil, &ArgumentError{fmt.Errorf("language %q: want %s, %s or %s", lang, Go, C, Rust)}
	}
	if err := checkEmpty(dir); err != nil {
		return nil, &ArgumentError{err}
	}
	files, err := render(name, lang)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+"-*")
	if err != nil {
		return nil, fmt.Errorf("write tool %s: %w", name, err)
	}
	defer os.RemoveAll(tmp) // gone once renamed
	if err := writeFiles(tmp, files); err != nil {
		return nil, fmt.Errorf("write tool %s: %w", name, err)
	}
	// MkdirTemp made it 0700; a source directory is the user's to share.
	if err := os.Chmod(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("write tool %s: %w", name, err)
	}
	// An empty dir makes way: os.Rename does not replace a directory.
	if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("write tool %s: %w", name, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return nil, fmt.Errorf("write tool %s: %w", name, err)
	}
	return slices.Sorted(maps.Keys(files)), nil
}

// checkEmpty refuses a dir that exists and holds anything, or is no
// directory, or cannot be read.
func checkEmpty(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("%s: exists and is not a directory", dir)
	}
	entries, err := os.ReadDir(dir)
	switch {
	case err != nil:
		return err
	case len(entries) > 0:
		return fmt.Errorf("%s: exists and is not empty", dir)
	}
	return nil
}

// render is the tool's files, by their path relative to its directory.
func render(name string, lang Lang) (map[string][]byte, error) {
	goVersion, err := sdkGoVersion()
	if err != nil {
		return nil, err
	}
	p := params{Name: name, GoVersion: goVersion, GoMinor: strings.TrimSuffix(goVersion, ".0"), Memory: "4MiB"}
	files := map[string][]byte{".gitignore": []byte("*.wasm\n")}
	switch lang {
	case Go:
		p.Memory = "32MiB"
		if err := addTemplates(files, "go", p, nil); err != nil {
			return nil, err
		}
		if err := addSDK(files, goVersion); err != nil {
			return nil, err
		}
	case C:
		if err := addTemplates(files, "c", p, map[string]string{"tool.c.tmpl": name + ".c"}); err != nil {
			return nil, err
		}
	case Rust:
		if err := addTemplates(files, "rust", p, map[string]string{"tool.rs.tmpl": name + ".rs"}); err != nil {
			return nil, err
		}
	}
	if err := addTemplate(files, "templates/manifest.json.tmpl", name+".json", p); err != nil {
		return nil, err
	}
	return files, nil
}

// checkName refuses a name a manifest would refuse, saying why as the
// manifest's check does.
func checkName(name string) error {
	m := manifest.Manifest{Name: name, ToolType: manifest.ToolTypeAction, InputSchema: map[string]any{"type": "object"}}
	err := m.Validate()
	var me *manifest.Error
	if errors.As(err, &me) && len(me.Problems) == 1 && me.Problems[0].Path == "name" {
		return fmt.Errorf("tool name %s", me.Problems[0].Problem)
	}
	return err
}

// addTemplates renders each template of templates/dir into files, under
// its name without .tmpl, or as renamed says.
func addTemplates(files map[string][]byte, dir string, p params, renamed map[string]string) error {
	entries, err := templates.ReadDir("templates/" + dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		out := renamed[e.Name()]
		if out == "" {
			out = strings.TrimSuffix(e.Name(), ".tmpl")
		}
		if err := addTemplate(files, "templates/"+dir+"/"+e.Name(), out, p); err != nil {
			return err
		}
	}
	return nil
}

func addTemplate(files map[string][]byte, name, out string, p params) error {
	t, err := template.ParseFS(templates, name)
	if err != nil {
		return fmt.Errorf("template %s: %w", name, err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, p); err != nil {
		return fmt.Errorf("template %s: %w", name, err)
	}
	files[out] = b.Bytes()
	return nil
}

// addSDK adds the copy of the Go SDK, without its tests, as a module of
// its own.
func addSDK(files map[string][]byte, goVersion string) error {
	files[sdkDir+"/go.mod"] = fmt.Appendf(nil, "// A copy of the tool SDK of %s, which is not published:\n// see ../README.md.\nmodule %s\n\ngo %s\n", module, module, goVersion)
	return fs.WalkDir(wasmtools.SDKSource, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, "_test.go") {
			return err
		}
		b, err := fs.ReadFile(wasmtools.SDKSource, p)
		files[path.Join(sdkDir, "wasmtools", p)] = b
		return err
	})
}

// sdkGoVersion is the Go release the SDK is written for, 1.N.0: the
// least goN tag its build constraints require (the reactor reseeds the
// runtime through internals checked for one Go version).
func sdkGoVersion() (string, error) {
	minor := 0
	err := fs.WalkDir(wasmtools.SDKSource, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(wasmtools.SDKSource, p)
		if err != nil {
			return err
		}
		for line := range strings.Lines(string(b)) {
			if !constraint.IsGoBuild(line) {
				continue
			}
			expr, err := constraint.Parse(line)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			if n := requiredGo(expr); n > minor {
				minor = n
			}
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("the SDK's Go version: %w", err)
	}
	if minor == 0 {
		return "", errors.New("the SDK's Go version: no build constraint names one")
	}
	return fmt.Sprintf("1.%d.0", minor), nil
}

// requiredGo is the N of the go1.N tag expr requires, if it requires
// one (a tag not under a negation, nor an or), or 0.
func requiredGo(expr constraint.Expr) int {
	switch e := expr.(type) {
	case *constraint.AndExpr:
		return max(requiredGo(e.X), requiredGo(e.Y))
	case *constraint.TagExpr:
		var n int
		if _, err := fmt.Sscanf(e.Tag, "go1.%d", &n); err == nil {
			return n
		}
	}
	return 0
}

// writeFiles writes files under dir.
func writeFiles(dir string, files map[string][]byte) error {
	for name, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
