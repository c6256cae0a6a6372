// Command cpuhog runs a command while busy loops keep the machine's cores
// busy, to show whether a test suite holds on a loaded machine (make
// test-under-load). The loops run in this process, at normal priority,
// so they end with it however it ends: when the command does, or when it
// is killed, even with SIGKILL; and they stop after -for at the latest.
// SIGINT and SIGTERM are passed on to the command. It exits with the
// command's status.
//
//	go run ./scripts/cpuhog [-loops 2] [-for 1h] COMMAND [ARGS...]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"syscall"
	"time"
)

func main() {
	loops := flag.Int("loops", 2, "busy loops: one per core keeps every core busy")
	limit := flag.Duration("for", time.Hour, "how long the loops run at most")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: cpuhog [-loops N] [-for D] COMMAND [ARGS...]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 || *loops < 0 || *limit <= 0 {
		flag.Usage()
		os.Exit(2)
	}
	os.Exit(run(*loops, *limit, flag.Args()))
}

// run runs argv beside loops busy loops that stop when it ends, or after
// limit, and returns its exit status.
func run(loops int, limit time.Duration, argv []string) int {
	ctx, stop := context.WithTimeout(context.Background(), limit)
	defer stop()
	// The loops must not take the Ps this process needs to start and
	// wait for the command.
	runtime.GOMAXPROCS(max(runtime.GOMAXPROCS(0), loops+1))
	for range loops {
		go spin(ctx)
	}
	fmt.Fprintf(os.Stderr, "cpuhog: %d busy loops for at most %s: %v\n", loops, limit, argv)

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "cpuhog: %v\n", err)
		return 127
	}
	go func() {
		for s := range sigs {
			cmd.Process.Signal(s)
		}
	}()
	err := cmd.Wait()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit) && exit.ExitCode() >= 0:
		return exit.ExitCode()
	}
	fmt.Fprintf(os.Stderr, "cpuhog: %s: %v\n", argv[0], err)
	return 1
}

// spin keeps one core busy until ctx ends, looking at it every million
// steps (about a millisecond).
func spin(ctx context.Context) {
	var x uint64
	for ctx.Err() == nil {
		for range 1 << 20 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	runtime.KeepAlive(x)
}
