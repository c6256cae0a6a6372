// Command natsd runs a NATS server on 127.0.0.1, in-process
// (github.com/nats-io/nats-server/v2), until it is interrupted: for the
// e2e tests' and demos' clusters and for trials on one machine, where
// Debian's nats-server is too old. In production, run the NATS project's
// nats-server.
//
// With -user and -password-file it lets in only clients with that user
// and password, as a cluster's NATS must (README, "Cluster mode"); the
// password is read from a file so that it is not in the process list.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/edgeaip/edgeaip/internal/natstest"
)

func main() {
	port := flag.Int("port", 4222, "port to listen on, on 127.0.0.1 (0: a free one)")
	user := flag.String("user", "", "let in only clients with this user and -password-file's password")
	passwordFile := flag.String("password-file", "", "`file` holding -user's password (its first line)")
	flag.Parse()
	opts, err := credentials(*user, *passwordFile)
	if err == nil {
		err = run(*port, opts)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "natsd:", err)
		os.Exit(1)
	}
}

// credentials are the options asking for user and the password in
// passwordFile: both or neither.
func credentials(user, passwordFile string) (natstest.Options, error) {
	if (user == "") != (passwordFile == "") {
		return natstest.Options{}, fmt.Errorf("-user and -password-file go together")
	}
	if user == "" {
		return natstest.Options{}, nil
	}
	data, err := os.ReadFile(passwordFile)
	if err != nil {
		return natstest.Options{}, fmt.Errorf("password: %w", err)
	}
	password, _, _ := strings.Cut(string(data), "\n")
	if password = strings.TrimSpace(password); password == "" {
		return natstest.Options{}, fmt.Errorf("password file %s: empty", passwordFile)
	}
	return natstest.Options{User: user, Password: password}, nil
}

// run serves on port until SIGINT or SIGTERM.
func run(port int, opts natstest.Options) error {
	s, err := natstest.RunWith(port, opts)
	if err != nil {
		return err
	}
	fmt.Println(s.URL()) // the first line: where it listens, for scripts
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	s.Stop()
	return nil
}
