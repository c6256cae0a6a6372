package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/edgeaip/edgeaip/wasmtools/scaffold"
	"github.com/spf13/cobra"
)

// initOutput is what aipctl tool init -o json prints.
type initOutput struct {
	Dir   string   `json:"dir"`
	Name  string   `json:"name"`
	Lang  string   `json:"lang"`
	Files []string `json:"files"`
}

func newInitCmd(g *globals) *cobra.Command {
	var lang, dir string
	cmd := &cobra.Command{
		Use:   "init NAME",
		Short: "Write a new tool's directory: its source, a manifest with its schema, a Makefile that builds and packs it",
		Long: `init writes the directory of a new tool called NAME (or --dir): its
source in the reactor form, which agents initialize once and start each
call from a snapshot of; NAME.json, its manifest, with the input schema
filled in; a Makefile whose make builds NAME.wasm and packs the manifest
into it, and make run calls it once, here; and a README. The tool greets
someone, so that it runs as written: make it yours from there.

A Go tool gets edgeaip-sdk/, a copy of this aipctl's tool SDK, which its
go.mod puts in place of the module github.com/edgeaip/edgeaip (not
published): it builds with a Go toolchain alone. A C tool needs clang and
wasi-libc (Debian: clang lld wasi-libc libclang-rt-NN-dev-wasm32). A Rust
tool needs rustc with a WASI target: rustup's wasm32-wasip1 (rustup target
add wasm32-wasip1), or Debian's rustc and libstd-rust-dev-wasm32, whose
target is wasm32-wasi; it uses the standard library alone.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if dir == "" {
				dir = name
			}
			files, err := scaffold.Write(dir, name, scaffold.Lang(lang))
			var refused *scaffold.ArgumentError
			switch {
			case errors.As(err, &refused):
				return &exitError{exitUsage, err}
			case err != nil:
				return &exitError{exitFailed, err}
			}
			if g.json() {
				return printJSON(cmd.OutOrStdout(), initOutput{Dir: dir, Name: name, Lang: lang, Files: files})
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "wrote %s: %s\n", dir, strings.Join(topLevel(files), ", "))
			fmt.Fprintf(w, "build and call it: cd %s && make && aipctl tool run %s.wasm name=world\n", dir, name)
			return nil
		},
	}
	langs := make([]string, len(scaffold.Langs()))
	for i, l := range scaffold.Langs() {
		langs[i] = string(l)
	}
	cmd.Flags().StringVar(&lang, "lang", langs[0], "the tool's language: "+strings.Join(langs[:len(langs)-1], ", ")+" or "+langs[len(langs)-1])
	cmd.Flags().StringVar(&dir, "dir", "", "the directory to write, which must not exist or be empty (default NAME)")
	cmd.RegisterFlagCompletionFunc("lang", cobra.FixedCompletions(langs, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// topLevel is files as a person reads them: what is in a subdirectory
// is the subdirectory, once ("edgeaip-sdk/").
func topLevel(files []string) []string {
	var out []string
	for _, f := range files {
		top, _, nested := strings.Cut(f, "/")
		if nested {
			top += "/"
		}
		if len(out) == 0 || out[len(out)-1] != top {
			out = append(out, top)
		}
	}
	return out
}
