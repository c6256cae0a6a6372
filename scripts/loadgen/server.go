package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/edgeaip/edgeaip/scripts/internal/aipserver"
	"github.com/edgeaip/edgeaip/server/api"
)

// serverBin is one aip-server to measure: a name for the report, the
// binary, the flags it is started with beside --listen and --data, where
// its CPU profile is served, if not at its own /debug/pprof/ behind the
// operator token, how many cluster nodes of it run (0 or 1: one), and
// where it keeps its data ("": as -pg and -nats say).
type serverBin struct {
	name  string
	path  string
	args  []string
	pprof string
	nodes int
	store storeKind
}

// parseBin reads "NAME=PATH [FLAG...]".
func parseBin(v string) (serverBin, error) {
	name, rest, ok := strings.Cut(v, "=")
	fields := strings.Fields(rest)
	if !ok || name == "" || len(fields) == 0 {
		return serverBin{}, fmt.Errorf("-bin %q: want NAME=PATH [FLAG...]", v)
	}
	return serverBin{name: name, path: fields[0], args: fields[1:]}, nil
}

// server is one running aip-server process on loopback, with a data dir
// of its own.
type server struct {
	*aipserver.Process
	data string
}

// startNode starts the server at path with args and a fresh data dir in
// work; with token set, it is given that operator token file first, as a
// cluster's further nodes are given their first node's.
func startNode(ctx context.Context, path string, args []string, work, token string) (*server, error) {
	data, err := os.MkdirTemp(work, "server-")
	if err != nil {
		return nil, err
	}
	if token != "" {
		b, err := os.ReadFile(token)
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(data, "admin.token"), b, 0o600); err != nil {
			return nil, err
		}
	}
	p, err := aipserver.Start(ctx, path, data, args...)
	if err != nil {
		os.RemoveAll(data)
		return nil, err
	}
	return &server{Process: p, data: data}, nil
}

// stop ends the server and removes its data.
func (s *server) stop() {
	s.Stop()
	os.RemoveAll(s.data)
}

func (s *server) pid() int { return s.Cmd.Process.Pid }

func (s *server) wsURL() string { return "ws://" + s.Addr + "/ws" }

// cpu is the CPU time the server has used, user and system, from
// /proc/PID/stat.
func (s *server) cpu() (time.Duration, error) {
	st, err := readStat(s.pid())
	return st.cpu, err
}

// procStat is what loadgen reads of a process's /proc/PID/stat.
type procStat struct {
	ppid int
	// cpu is its user and system time; children's is that of its
	// children that ended and were waited for.
	cpu, children time.Duration
}

// readStat reads /proc/PID/stat.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	// The command name, in parentheses, may hold spaces: fields start
	// after its closing one, at field 3. ppid is field 4; utime, stime,
	// cutime and cstime are fields 14 to 17.
	rest := string(b[strings.LastIndexByte(string(b), ')')+2:])
	f := strings.Fields(rest)
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var n [5]int64
	for i, k := range []int{1, 11, 12, 13, 14} {
		if n[i], err = strconv.ParseInt(f[k], 10, 64); err != nil {
			return procStat{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
	}
	tick := func(t int64) time.Duration { return time.Duration(t) * time.Second / clockTicks }
	return procStat{ppid: int(n[0]), cpu: tick(n[1] + n[2]), children: tick(n[3] + n[4])}, nil
}

// clockTicks is the kernel's USER_HZ, in which /proc reports CPU time:
// 100 on every Linux this runs on.
const clockTicks = 100

// rssKiB is the server's resident memory, from /proc/PID/status.
func (s *server) rssKiB() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.pid()))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/status has no VmRSS", s.pid())
}

// enroll enrolls n devices, "dev-0" to "dev-(n-1)", a few at a time, and
// returns their tokens in that order.
func (s *server) enroll(ctx context.Context, n int) ([]string, error) {
	tokens := make([]string, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	next := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				resp, err := s.API.Enroll(ctx, api.EnrollRequest{ID: deviceID(i)})
				if err != nil {
					errs <- fmt.Errorf("enroll %s: %w", deviceID(i), err)
					continue
				}
				tokens[i] = resp.Token
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	return tokens, errors.Join(collectErrs(errs)...)
}

func collectErrs(errs <-chan error) []error {
	var out []error
	for err := range errs {
		out = append(out, err)
	}
	return out
}

func deviceID(i int) string { return "dev-" + strconv.Itoa(i) }

// profile fetches a CPU profile of seconds from the server into path: from
// its own /debug/pprof/ with the operator token, or from bin.pprof.
func (s *server) profile(ctx context.Context, bin serverBin, seconds int, path string) error {
	base := "http://" + s.Addr
	if bin.pprof != "" {
		base = bin.pprof
	}
	req, err := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", base, seconds), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+s.API.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile: %s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
