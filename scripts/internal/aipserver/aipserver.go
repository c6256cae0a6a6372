// Package aipserver runs an aip-server binary on loopback for the
// measuring programs under scripts/: on a free port, with a data dir of
// the caller's, until Stop.
package aipserver

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/edgeaip/edgeaip/server/api"
)

// Process is a running aip-server.
type Process struct {
	Cmd  *exec.Cmd
	Addr string      // host:port it serves on
	API  *api.Client // with the operator token
}

// Start runs binary on a free loopback port with data as its data dir and
// args as further flags, its logs dropped, and waits until its API
// answers.
func Start(ctx context.Context, binary, data string, args ...string) (*Process, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, append([]string{"--listen", addr, "--data", data}, args...)...)
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", binary, err)
	}
	p := &Process{Cmd: cmd, Addr: addr, API: &api.Client{BaseURL: "http://" + addr}}
	for range 1000 {
		if b, err := os.ReadFile(filepath.Join(data, "admin.token")); err == nil && len(b) > 0 {
			p.API.Token = strings.TrimSpace(string(b))
			if _, err := p.API.Devices(ctx); err == nil {
				return p, nil
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	p.Stop()
	return nil, fmt.Errorf("%s did not come up on %s", binary, addr)
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Stop ends the server as an operator would, with SIGTERM, and waits for
// it; one that has not exited 20 s later is killed.
func (p *Process) Stop() {
	p.Cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { p.Cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		p.Cmd.Process.Kill()
		<-done
	}
}
