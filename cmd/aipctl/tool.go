package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/edgeaip/edgeaip/internal/atomicfile"
	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/edgeaip/edgeaip/wasmtools/abi"
	"github.com/edgeaip/edgeaip/wasmtools/manifest"
	"github.com/edgeaip/edgeaip/wasmtools/section"
	"github.com/edgeaip/edgeaip/wasmtools/signature"
	"github.com/spf13/cobra"
)

func newToolCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tool",
		Short: "Build, sign, check, run and deploy tool modules",
		Long: `Tool modules are WASI modules, reactors (which agents initialize once
and start each call from a snapshot of) or commands, that carry their
manifest in the custom section aip.tool and, once signed, an ed25519
signature in aip.sig.

A tool author's loop (a Go tool built with wasmtools/sdk/reactor):
  aipctl tool keygen --out acme              # once: acme.key, acme.pub
  aipctl tool init t && cd t                 # once: source, manifest t.json, Makefile
  make                                       # t.wasm, packed: go build, then aipctl tool pack t.wasm --manifest t.json
  aipctl tool run t.wasm name=world          # with --allow-dir ./data:/data for a tool that reads files
  aipctl tool sign --key acme.key t.wasm
  aipctl tool deploy kiosk-1 t.wasm

keygen, pack and sign write the file --out names (pack and sign: in
place without it); -o is the output format, as for every command.`,
	}
	cmd.AddCommand(newInitCmd(g), newKeygenCmd(g), newPackCmd(g), newSignCmd(g), newVerifyCmd(g), newInspectCmd(g), newRunCmd(), newDeployCmd(g))
	return cmd
}

// keygenOutput is what aipctl tool keygen -o json prints.
type keygenOutput struct {
	KeyID      string `json:"key_id"`
	PrivateKey string `json:"private_key"`
	PublicKey  string `json:"public_key"`
}

func newKeygenCmd(g *globals) *cobra.Command {
	var out string
	var force bool
	cmd := &cobra.Command{
		Use:   "keygen [--out NAME]",
		Short: "Write a new ed25519 key pair: NAME.key (secret, mode 0600) and NAME.pub",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			pub, priv, err := signature.GenerateKey()
			if err != nil {
				return &exitError{exitFailed, err}
			}
			privPEM, err := signature.EncodePrivateKey(priv)
			if err != nil {
				return &exitError{exitFailed, err}
			}
			pubPEM, err := signature.EncodePublicKey(pub)
			if err != nil {
				return &exitError{exitFailed, err}
			}
			if !force {
				if err := refuseExisting(out+".key", out+".pub"); err != nil {
					return err
				}
			}
			if err := writeFile(out+".key", privPEM, 0o600); err != nil {
				return err
			}
			if err := writeFile(out+".pub", pubPEM, 0o644); err != nil {
				return err
			}
			if g.json() {
				return printJSON(cmd.OutOrStdout(), keygenOutput{signature.KeyID(pub), out + ".key", out + ".pub"})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "key id %s\n%s.key: the signing key; keep it secret\n%s.pub: give it to agents (--trusted-key)\n",
				signature.KeyID(pub), out, out)
			return nil
		},
	}
	fileFlags(cmd, g, &out, "aip-tool", "write NAME.key and NAME.pub")
	cmd.Flags().BoolVar(&force, "force", false, "overwrite existing key files")
	return cmd
}

// fileFlags gives a command that writes a file --out FILE, which names
// it. -o is the output format, as for every command. Until the release
// after next, -o FILE (or --output FILE), which named the file before, is
// still taken for --out with a warning (legacyOutFile), and so is
// --format, which set the output format.
func fileFlags(cmd *cobra.Command, g *globals, out *string, def, usage string) {
	f := cmd.Flags()
	f.StringVar(out, "out", def, usage)
	f.StringVar(&g.output, "format", "table", "the output format: use -o")
	f.MarkHidden("format")
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[legacyOutFile] = "true"
}

// legacyOutFile marks a command that took -o FILE for the file it writes
// (tool keygen, pack and sign), which it still does for a release, with a
// warning: -o is the output format.
const legacyOutFile = "legacy-o-file"

// warnLegacyFormat says on stderr that --format, given to cmd, is
// deprecated, and refuses a value that is not a format.
func warnLegacyFormat(cmd *cobra.Command, g *globals) error {
	if !cmd.Flags().Changed("format") {
		return nil
	}
	if g.output != "table" && g.output != "json" {
		return &exitError{exitUsage, fmt.Errorf("--format: want table or json, got %q", g.output)}
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "aipctl: warning: %s --format is deprecated, and stops working in the next release: write -o %s, as for every command\n",
		cmd.CommandPath(), g.output)
	return nil
}

// takeLegacyOutFile takes -o FILE, which is not an output format, as
// --out FILE on a command that once took it so, saying so on stderr. It
// reports whether it did.
func takeLegacyOutFile(cmd *cobra.Command, g *globals) (bool, error) {
	if cmd.Annotations[legacyOutFile] == "" {
		return false, nil
	}
	if cmd.Flags().Changed("out") {
		return false, &exitError{exitUsage, fmt.Errorf("-o %q with --out: -o is the output format, table or json, and --out names the file", g.output)}
	}
	file := g.output
	if err := cmd.Flags().Set("out", file); err != nil {
		return false, &exitError{exitUsage, err}
	}
	g.output = "table"
	fmt.Fprintf(cmd.ErrOrStderr(), "aipctl: warning: %s -o FILE is deprecated, and stops working in the next release: write --out %s (-o is the output format, as for every command)\n",
		cmd.CommandPath(), file)
	return true, nil
}

// refuseExisting fails if any of paths exists: --force replaces them.
func refuseExisting(paths ...string) error {
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			return &exitError{exitUsage, fmt.Errorf("%s exists; pass --force to replace it", p)}
		}
	}
	return nil
}

// writeFile replaces path with data, mode perm, whole: a failure, or a
// reader at the wrong moment, sees the old file or the new one, never
// part of either; and a key is never readable by others, even for a
// moment over a file that was.
func writeFile(path string, data []byte, perm os.FileMode) error {
	if err := atomicfile.WriteMode(path, data, perm); err != nil {
		return &exitError{exitFailed, err}
	}
	return nil
}

// writeModule writes a module to path, keeping the mode of the file it
// replaces (a module written in place keeps its own).
func writeModule(path string, wasm []byte) error {
	perm := os.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		perm = fi.Mode().Perm()
	}
	return writeFile(path, wasm, perm)
}

// moduleOutput is what aipctl tool pack and sign print with -o json.
type moduleOutput struct {
	Path    string `json:"path"`
	Name    string `json:"name,omitempty"`
	Version string `json:"version,omitempty"`
	KeyID   string `json:"key_id,omitempty"`
	Size    int    `json:"size"`
	SHA256  string `json:"sha256"`
}

func newPackCmd(g *globals) *cobra.Command {
	var manifestPath, out string
	cmd := &cobra.Command{
		Use:   "pack IN.wasm --manifest TOOL.json [--out OUT.wasm]",
		Short: "Embed a manifest in a module (in place unless --out); it does not instrument",
		Long: `Embed a manifest in a module, as its aip.tool custom section, replacing
any it had. The manifest is checked first, schemas included, and the module
must take one of the ABI's forms, a reactor (export aip_call) or a WASI
command (export _start), that the manifest's init suits. A signature the
module carried no longer matches, so it is removed: sign after packing.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			wasm, err := readModule(args[0])
			if err != nil {
				return err
			}
			b, err := os.ReadFile(manifestPath)
			if err != nil {
				return &exitError{exitUsage, fmt.Errorf("--manifest: %w", err)}
			}
			m, err := manifest.Parse(b)
			if err != nil {
				return &exitError{exitUsage, manifestFailure(manifestPath, err)}
			}
			if _, _, err := startOf(wasm, m); err != nil {
				return &exitError{exitUsage, fmt.Errorf("%s: %w", args[0], err)}
			}
			if _, signed, _ := section.Custom(wasm, signature.SectionName); signed {
				fmt.Fprintf(cmd.ErrOrStderr(), "removing the signature of %s: sign the packed module again\n", args[0])
				if wasm, err = section.WithoutCustom(wasm, signature.SectionName); err != nil {
					return &exitError{exitUsage, err}
				}
			}
			packed, err := manifest.Embed(wasm, m)
			if err != nil {
				return &exitError{exitUsage, err}
			}
			if out == "" {
				out = args[0]
			}
			if err := writeModule(out, packed); err != nil {
				return err
			}
			if g.json() {
				return printJSON(cmd.OutOrStdout(), moduleOutput{Path: out, Name: m.Name, Version: m.Version, Size: len(packed), SHA256: digest(packed)})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "packed %s into %s (%d bytes, sha256 %s)\n",
				strings.TrimSpace(m.Name+" "+m.Version), out, len(packed), digest(packed))
			return nil
		},
	}
	cmd.Flags().StringVar(&manifestPath, "manifest", "", "the manifest, JSON (required)")
	fileFlags(cmd, g, &out, "", "write the packed module here (default: in place)")
	cmd.MarkFlagRequired("manifest")
	return cmd
}

func newSignCmd(g *globals) *cobra.Command {
	var keyPath, out string
	cmd := &cobra.Command{
		Use:   "sign --key NAME.key MODULE.wasm [--out OUT.wasm]",
		Short: "Sign a packed module (in place unless --out), replacing any signature",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			priv, err := signature.LoadPrivateKey(keyPath)
			if err != nil {
				return &exitError{exitUsage, fmt.Errorf("--key: %w", err)}
			}
			wasm, err := readModule(args[0])
			if err != nil {
				return err
			}
			if _, err := manifest.FromWasm(wasm); err != nil {
				return &exitError{exitUsage, fmt.Errorf("%s: %w; run aipctl tool pack first, so that the signature covers the manifest", args[0], err)}
			}
			signed, err := signature.Sign(wasm, priv)
			if err != nil {
				return &exitError{exitUsage, err}
			}
			if out == "" {
				out = args[0]
			}
			if err := writeModule(out, signed); err != nil {
				return err
			}
			s, _, _ := signature.Read(signed)
			if g.json() {
				return printJSON(cmd.OutOrStdout(), moduleOutput{Path: out, KeyID: s.KeyID, Size: len(signed), SHA256: digest(signed)})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "signed %s with key id %s (sha256 %s)\n", out, s.KeyID, digest(signed))
			return nil
		},
	}
	cmd.Flags().StringVar(&keyPath, "key", "", "the private key, PEM (required)")
	fileFlags(cmd, g, &out, "", "write the signed module here (default: in place)")
	cmd.MarkFlagRequired("key")
	return cmd
}

// verifyOutput is what aipctl tool verify -o json prints: the verdict,
// whichever it is.
type verifyOutput struct {
	Path     string `json:"path"`
	Verified bool   `json:"verified"`
	KeyID    string `json:"key_id,omitempty"`
	Error    string `json:"error,omitempty"`
}

func newVerifyCmd(g *globals) *cobra.Command {
	var pubs []string
	cmd := &cobra.Command{
		Use:   "verify --pub NAME.pub [--pub ...] MODULE.wasm",
		Short: "Check a module's signature against public keys, as an agent would",
		Long:  "Check a module's signature against public keys, as an agent would. Exits 0 if it verifies, 1 if not.",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ring, err := signature.LoadKeyRing(pubs...)
			if err != nil {
				return &exitError{exitUsage, fmt.Errorf("--pub: %w", err)}
			}
			wasm, err := readModule(args[0])
			if err != nil {
				return err
			}
			keyID, verr := ring.Verify(wasm)
			v := verifyOutput{Path: args[0], Verified: verr == nil, KeyID: keyID}
			if verr != nil {
				verr = fmt.Errorf("%s: %w", args[0], verr)
				v.Error = verr.Error()
			}
			switch {
			case g.json():
				if err := printJSON(cmd.OutOrStdout(), v); err != nil {
					return &exitError{exitFailed, err}
				}
			case verr == nil:
				fmt.Fprintf(cmd.OutOrStdout(), "%s: signature ok, key id %s\n", args[0], keyID)
			}
			if verr != nil {
				return &exitError{exitFailed, verr}
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&pubs, "pub", nil, "a trusted public key, PEM (repeatable, at least one)")
	cmd.MarkFlagRequired("pub")
	return cmd
}

// manifestFailure says what is wrong with the manifest file path.
func manifestFailure(path string, err error) error {
	var bad *manifest.Error
	if errors.As(err, &bad) {
		return fileFailure(path, "the manifest is not valid", bad.Problems)
	}
	return fmt.Errorf("%s: %w", path, err)
}

// readModule reads a module file; any failure is the caller's to fix.
func readModule(path string) ([]byte, error) {
	wasm, err := os.ReadFile(path)
	if err != nil {
		return nil, &exitError{exitUsage, err}
	}
	if _, err := section.Parse(wasm); err != nil {
		return nil, &exitError{exitUsage, fmt.Errorf("%s: %w", path, err)}
	}
	return wasm, nil
}

// startOf is the form of wasm and how its calls start under m: the
// sandbox's rule, so that a module pack accepts is one an agent loads.
func startOf(wasm []byte, m manifest.Manifest) (abi.Form, sandbox.Start, error) {
	form, err := abi.FormOf(wasm)
	if err != nil {
		if errors.Is(err, abi.ErrNoForm) {
			err = fmt.Errorf("%w (build with GOOS=wasip1, or clang --target=wasm32-wasi)", err)
		}
		return "", "", err
	}
	start, err := sandbox.StartOf(form, m.Init)
	return form, start, err
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
