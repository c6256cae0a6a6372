package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/spf13/cobra"
)

// withSecretOut gives cmd, which prints a credential (a token, or a
// certificate), --out FILE: what it would print goes to FILE instead,
// created with mode 0600, where a shell's > gives the umask's 0644. An
// existing FILE is refused before the server is asked anything, so that
// a credential the server issues once is never lost, nor one on disk
// replaced.
func withSecretOut(cmd *cobra.Command, what string) {
	var path string
	cmd.Flags().StringVar(&path, "out", "", "write the "+what+" (with -o json, the response) to this new file, mode 0600, instead of stdout; an existing file is refused")
	run := cmd.RunE
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if path == "" {
			return run(cmd, args)
		}
		f, err := createPrivate(path)
		if err != nil {
			return err
		}
		cmd.SetOut(f)
		err = run(cmd, args)
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil && cerr != nil {
			err = &exitError{exitFailed, fmt.Errorf("--out %s: %w", path, cerr)}
		}
		if err != nil {
			os.Remove(path)
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s (mode 0600)\n", path)
		return nil
	}
}

// createPrivate creates path, mode 0600, refusing one that exists.
func createPrivate(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case errors.Is(err, fs.ErrExist):
		return nil, &exitError{exitUsage, fmt.Errorf("--out %s: the file exists; aipctl does not replace a credential: remove it first, or name another file", path)}
	case err != nil:
		return nil, &exitError{exitUsage, fmt.Errorf("--out: %w", err)}
	}
	return f, nil
}
