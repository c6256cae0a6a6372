// Command cborgen writes the per-field code of protocol's CBOR fast path
// from the message structs, so that messages.go is the one place a wire
// field is stated: its Go name, type, CBOR key and omit rule.
//
// It type-checks the package's source (not the compiled package, which
// needs the generated file to build, so a stale or broken one could not be
// regenerated), walks the structs reachable from the message types named
// as arguments, and writes one file of code for them: a reader method and
// a writer method for each struct, with their fields in the order Core
// Deterministic Encoding sorts them, and the dispatch from a Message to
// them. What is the same for every field (the reader primitives, the
// free-form value codec) stays hand-written in the package.
//
// Usage, from protocol's directory (see the go:generate line in
// messages.go):
//
//	go run ./internal/cborgen -o cbor_fast_gen.go ServerMessage ClientMessage
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

func main() {
	if err := run(".", os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "cborgen:", err)
		os.Exit(1)
	}
}

// config is what the command line asks for.
type config struct {
	out   string   // the generated file, relative to the package directory
	roots []string // the message types, as the package names them
}

func parseArgs(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("cborgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c config
	fs.StringVar(&c.out, "o", "", "the file to write, in the package directory")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.roots = fs.Args()
	if c.out == "" || len(c.roots) == 0 {
		return c, errors.New("usage: cborgen -o FILE MESSAGE_TYPE...")
	}
	return c, nil
}

// run generates the code for the package in dir and writes it.
func run(dir string, args []string, stderr io.Writer) error {
	c, err := parseArgs(args, stderr)
	if err != nil {
		return err
	}
	src, err := generate(dir, c)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, c.out)
	if err := os.WriteFile(path, src, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// generate returns the generated file for the package in dir.
func generate(dir string, c config) ([]byte, error) {
	m, err := loadModel(dir, c.out, c.roots)
	if err != nil {
		return nil, err
	}
	return emit(m)
}
