package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/edgeaip/edgeaip/server"
)

// subcommands are aip-server's commands besides serving, by their first
// argument.
var subcommands = map[string]func(args []string, stdout io.Writer) error{
	"store":  storeCommand,
	"backup": backupCommand,
}

// storeCommand runs aip-server store copy.
func storeCommand(args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "copy" {
		return errors.New("usage: aip-server store copy --from DIR|URL --to URL|DIR [--replace]")
	}
	fs := flag.NewFlagSet("aip-server store copy", flag.ContinueOnError)
	from := fs.String("from", "", "the store to copy: a data dir (its SQLite database), or a postgres:// URL")
	to := fs.String("to", "", "the store to copy it into: a postgres:// URL, or a data dir")
	replace := fs.Bool("replace", false, "empty a target PostgreSQL store that holds rows, instead of refusing it")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *from == "" || *to == "" {
		return errors.New("store copy: --from and --to are required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	tables, err := server.CopyStore(ctx, *from, *to, *replace)
	if err != nil {
		return err
	}
	var rows int64
	for _, t := range tables {
		fmt.Fprintf(stdout, "%-22s %10d rows  digest %s\n", t.Table, t.Rows, t.Digest)
		rows += t.Rows
	}
	fmt.Fprintf(stdout, "copied %d tables, %d rows; each table's count and digest match on both sides\n", len(tables), rows)
	return nil
}

// backupCommand runs aip-server backup.
func backupCommand(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("aip-server backup", flag.ContinueOnError)
	data := fs.String("data", "./aip-data", "data directory of the SQLite store to back up (its server may be running)")
	to := fs.String("to", "", "the `file` to write the backup to; it must not exist")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *to == "" {
		return errors.New("backup: --to is required (a PostgreSQL store is backed up with pg_dump)")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := server.BackupStore(ctx, *data, *to); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "backed up %s to %s\n", *data, *to)
	return nil
}
