package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/edgeaip/edgeaip/wasmtools/abi"
	"github.com/edgeaip/edgeaip/wasmtools/manifest"
	"github.com/edgeaip/edgeaip/wasmtools/section"
	"github.com/edgeaip/edgeaip/wasmtools/signature"
	"github.com/spf13/cobra"
)

// inspection is what aipctl tool inspect shows of a module.
type inspection struct {
	Path           string             `json:"path"`
	Size           int                `json:"size"`
	SHA256         string             `json:"sha256"`
	ManifestSource string             `json:"manifest_source"` // embedded, sidecar or none
	Manifest       *manifest.Manifest `json:"manifest,omitempty"`
	ManifestError  string             `json:"manifest_error,omitempty"`
	Signature      *signatureView     `json:"signature,omitempty"`
	// Imports lists each distinct import once, in the order of its first
	// appearance: Go's linker emits some twice (fd_write).
	Imports []importView `json:"imports"`
	// Form is the module's form under the ABI (reactor or command), and
	// Start how an agent starts its calls, as the manifest's init asks;
	// FormError says why it takes neither form, or why the two disagree.
	Form      abi.Form      `json:"form,omitempty"`
	Start     sandbox.Start `json:"start,omitempty"`
	FormError string        `json:"form_error,omitempty"`
}

// importView is one distinct import, and how many times the module
// imports it.
type importView struct {
	section.Import
	Count int `json:"count"`
}

// distinctImports lists each import of imports once, with its count.
func distinctImports(imports []section.Import) []importView {
	out := []importView{}
	at := map[section.Import]int{}
	for _, imp := range imports {
		if i, seen := at[imp]; seen {
			out[i].Count++
			continue
		}
		at[imp] = len(out)
		out = append(out, importView{imp, 1})
	}
	return out
}

type signatureView struct {
	Alg   string `json:"alg,omitempty"`
	KeyID string `json:"key_id,omitempty"`
	Error string `json:"error,omitempty"`
}

func newInspectCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "inspect MODULE.wasm",
		Short: "Show a module's form, manifest, capabilities, signature, imports, size and sha256",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in, err := inspect(args[0])
			if err != nil {
				return err
			}
			if g.json() {
				return printJSON(cmd.OutOrStdout(), in)
			}
			return printInspection(cmd.OutOrStdout(), in)
		},
	}
}

func inspect(path string) (inspection, error) {
	wasm, err := readModule(path)
	if err != nil {
		return inspection{}, err
	}
	in := inspection{Path: path, Size: len(wasm), SHA256: digest(wasm), ManifestSource: "none"}
	imports, err := section.Imports(wasm)
	if err != nil {
		return inspection{}, &exitError{exitUsage, fmt.Errorf("%s: %w", path, err)}
	}
	in.Imports = distinctImports(imports)
	mod, err := manifest.Load(path)
	switch {
	case err == nil:
		in.ManifestSource, in.Manifest = string(mod.Source), &mod.Manifest
	case !errors.Is(err, manifest.ErrNone):
		in.ManifestError = err.Error()
	}
	if in.Form, in.Start, err = startOf(wasm, mod.Manifest); err != nil {
		in.FormError = err.Error()
	}
	s, signed, err := signature.Read(wasm)
	switch {
	case err != nil:
		in.Signature = &signatureView{Error: err.Error()}
	case signed:
		in.Signature = &signatureView{Alg: s.Alg, KeyID: s.KeyID}
	}
	return in, nil
}

func printInspection(w io.Writer, in inspection) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "module\t%s\n", in.Path)
	fmt.Fprintf(tw, "size\t%d bytes\n", in.Size)
	fmt.Fprintf(tw, "sha256\t%s\n", in.SHA256)
	fmt.Fprintf(tw, "form\t%s\n", formText(in))
	fmt.Fprintf(tw, "manifest\t%s\n", in.ManifestSource)
	if in.ManifestError != "" {
		fmt.Fprintf(tw, "  error\t%s\n", in.ManifestError)
	}
	if m := in.Manifest; m != nil {
		fmt.Fprintf(tw, "  name\t%s\n", m.Name)
		fmt.Fprintf(tw, "  version\t%s\n", orDash(m.Version))
		fmt.Fprintf(tw, "  tool_type\t%s\n", m.ToolType)
		fmt.Fprintf(tw, "  description\t%s\n", orDash(m.Description))
		fmt.Fprintf(tw, "  dirs\t%s\n", dirsText(m.Capabilities.Dirs))
		fmt.Fprintf(tw, "  env\t%s\n", orDash(strings.Join(m.Capabilities.Env, ", ")))
		fmt.Fprintf(tw, "  limits\t%s\n", limitsText(m.Limits))
		schema, _ := json.Marshal(m.InputSchema)
		fmt.Fprintf(tw, "  input_schema\t%s\n", schema)
		if m.OutputSchema != nil {
			schema, _ := json.Marshal(m.OutputSchema)
			fmt.Fprintf(tw, "  output_schema\t%s\n", schema)
		}
	}
	switch s := in.Signature; {
	case s == nil:
		fmt.Fprintf(tw, "signature\tnone\n")
	case s.Error != "":
		fmt.Fprintf(tw, "signature\tunreadable: %s\n", s.Error)
	default:
		fmt.Fprintf(tw, "signature\t%s, key id %s (check it with aipctl tool verify --pub KEY)\n", s.Alg, s.KeyID)
	}
	fmt.Fprintf(tw, "imports\t%d\n", len(in.Imports))
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, imp := range in.Imports {
		times := ""
		if imp.Count > 1 {
			times = fmt.Sprintf(", imported %d times", imp.Count)
		}
		fmt.Fprintf(w, "  %s.%s (%s%s)\n", imp.Module, imp.Name, imp.Kind, times)
	}
	return nil
}

// formText says which form the module takes and how its calls start.
func formText(in inspection) string {
	switch {
	case in.FormError != "":
		return "refused: " + in.FormError
	case in.Start == sandbox.StartSnapshot:
		return "reactor, started from a snapshot: initialized once per loaded version, each call from a snapshot of that"
	case in.Start == sandbox.StartPlain:
		return "reactor, started plainly: each call initializes it"
	}
	return "command (ABI v1): each call runs _start"
}

func dirsText(dirs []manifest.Dir) string {
	parts := make([]string, len(dirs))
	for i, d := range dirs {
		parts[i] = fmt.Sprintf("%s (%s)", d.Path, d.Mode)
	}
	return orDash(strings.Join(parts, ", "))
}

func limitsText(l manifest.Limits) string {
	var parts []string
	if l.Timeout != 0 {
		parts = append(parts, "timeout "+time.Duration(l.Timeout).String())
	}
	if l.Memory != 0 {
		b, _ := json.Marshal(l.Memory)
		parts = append(parts, "memory "+strings.Trim(string(b), `"`))
	}
	if l.Fuel != 0 {
		parts = append(parts, fmt.Sprintf("fuel %d", l.Fuel))
	}
	if len(parts) == 0 {
		return "the agent's defaults"
	}
	return strings.Join(parts, ", ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
