// Command natsd runs a NATS server on 127.0.0.1, in-process
// (github.com/nats-io/nats-server/v2), until it is interrupted: for the
// e2e tests' and demos' clusters and for trials on one machine, where
// Debian's nats-server is too old. In production, run the NATS project's
// nats-server.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/edgeaip/edgeaip/internal/natstest"
)

func main() {
	port := flag.Int("port", 4222, "port to listen on, on 127.0.0.1 (0: a free one)")
	flag.Parse()
	s, err := natstest.Run(*port)
	if err != nil {
		fmt.Fprintln(os.Stderr, "natsd:", err)
		os.Exit(1)
	}
	fmt.Println(s.URL()) // the first line: where it listens, for scripts
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	s.Stop()
}
