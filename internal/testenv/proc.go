package testenv

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// OpenFilesIn counts the files process pid has open in dir, from
// /proc/PID/fd; it skips the test where there is no /proc.
func OpenFilesIn(t testing.TB, pid int, dir string) int {
	t.Helper()
	fdDir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		t.Skipf("cannot count the open files of process %d: %v", pid, err)
	}
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink(filepath.Join(fdDir, fd.Name())); err == nil && strings.HasPrefix(target, dir+"/") {
			n++
		}
	}
	return n
}

// ResidentKiB is process pid's resident memory (VmRSS), in KiB.
func ResidentKiB(t testing.TB, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("cannot read the memory of process %d: %v", pid, err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				t.Fatalf("/proc/%d/status: VmRSS %q: %v", pid, rest, err)
			}
			return kib
		}
	}
	t.Fatalf("/proc/%d/status has no VmRSS", pid)
	return 0
}

// GetAtOnce sends n GETs at once to baseURL, the i-th for paths[i %
// len(paths)], each on a connection of its own and with token as the
// bearer, and fails the test unless each answers 200.
func GetAtOnce(t testing.TB, baseURL, token string, paths []string, n int) {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	defer client.CloseIdleConnections()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = get(client, baseURL+paths[i%len(paths)], token) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("GET %d of %d: %v", i, n, err)
		}
	}
}

func get(client *http.Client, url, token string) error {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

var (
	commandsMu sync.Mutex
	commands   = map[string]string{}
)

// Command builds ./cmd/name for this machine, once per test binary, and
// returns the path of the binary: for tests that run it as a user would,
// from a shell or a terminal. A name with a slash is a package path from
// the module's root (internal/natstest/natsd), built as its last element.
func Command(t testing.TB, name string) string {
	t.Helper()
	commandsMu.Lock()
	defer commandsMu.Unlock()
	if bin, ok := commands[name]; ok {
		return bin
	}
	dir, err := commandDir()
	if err != nil {
		t.Fatalf("build %s: %v", name, err)
	}
	pkg := "./cmd/" + name
	if strings.Contains(name, "/") {
		pkg = "./" + name
	}
	bin := filepath.Join(dir, filepath.Base(name))
	cmd := exec.Command(Go(), "build", "-o", bin, pkg)
	cmd.Dir = Root()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	commands[name] = bin
	return bin
}

// commandDir is where this test process keeps the commands it builds:
// a directory named by its pid, since a test binary has no hook that runs
// as it exits. Those of processes that have ended are removed first,
// where /proc says which have.
func commandDir() (string, error) {
	const prefix = "edgeaip-cmd-"
	old, _ := filepath.Glob(filepath.Join(os.TempDir(), prefix+"*"))
	if _, err := os.Stat("/proc/self"); err != nil {
		old = nil
	}
	for _, d := range old {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), prefix))
		if err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); os.IsNotExist(err) {
			os.RemoveAll(d)
		}
	}
	dir := filepath.Join(os.TempDir(), prefix+strconv.Itoa(os.Getpid()))
	return dir, os.MkdirAll(dir, 0o755)
}
