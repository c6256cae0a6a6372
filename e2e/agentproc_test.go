package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/stretchr/testify/require"
)

var (
	agentBinMu sync.Mutex
	agentBins  = map[string]string{} // by GOARCH
)

// agentBinary builds cmd/aip-agent for this machine, once per test binary.
func agentBinary(t testing.TB) string { return agentBinaryFor(t, runtime.GOARCH) }

// agentBinaryFor builds cmd/aip-agent for linux/goarch (arm as ARMv7)
// exactly as `make cross` does, once per test binary.
func agentBinaryFor(t testing.TB, goarch string) string {
	t.Helper()
	agentBinMu.Lock()
	defer agentBinMu.Unlock()
	if bin, ok := agentBins[goarch]; ok {
		return bin
	}
	dir, err := os.MkdirTemp("", "edgeaip-e2e-bin-")
	require.NoError(t, err)
	bin := filepath.Join(dir, "aip-agent")
	cmd := exec.Command(testenv.Go(), "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./cmd/aip-agent")
	cmd.Dir = testenv.Root()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch, "GOARM=7")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build ./cmd/aip-agent for %s:\n%s", goarch, out)
	agentBins[goarch] = bin
	return bin
}

// agentProcess is aip-agent run as a process of its own, from a config
// file, so that a test can kill it and start it again on the same data dir.
type agentProcess struct {
	t      testing.TB
	argv   []string // the agent's command, less its config flag
	config string
	log    string // its stderr, across restarts
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // how it exited; set before exited closes
}

// agentYAML is the config of a test agent process: the stock tools and
// the fixtures, files allowed, the compile cache every test agent shares,
// and a link that notices drops fast.
func agentYAML(t testing.TB, id, wsURL, tokenFile, dataDir, files string) string {
	return agentYAMLWithTools(t, id, wsURL, tokenFile, dataDir, files,
		"stock="+testenv.StockToolsDir(t), "fixtures="+testenv.TestdataTools())
}

// agentYAMLWithTools is agentYAML with toolDirs (namespace=dir) as its
// tool dirs.
func agentYAMLWithTools(t testing.TB, id, wsURL, tokenFile, dataDir, files string, toolDirs ...string) string {
	quoted := make([]string, len(toolDirs))
	for i, d := range toolDirs {
		quoted[i] = strconv.Quote(d)
	}
	return fmt.Sprintf(`device: {id: %s}
server: {url: %q, token_file: %q, heartbeat: 1s, ping: 1s}
data_dir: %q
compile_cache: %q
commands: {max_concurrent: 4, shutdown_grace: 10s}
tools:
  dirs: [%s]
  allow_dirs: [%q]
`, id, wsURL, tokenFile, dataDir, sharedCompileCache(t), strings.Join(quoted, ", "), files)
}

// newAgentProcess writes yaml as the agent's config; start runs it.
func newAgentProcess(t testing.TB, yaml string) *agentProcess {
	t.Helper()
	dir := t.TempDir()
	p := &agentProcess{t: t, argv: []string{agentBinary(t)}, config: filepath.Join(dir, "agent.yaml"), log: filepath.Join(dir, "agent.log")}
	require.NoError(t, os.WriteFile(p.config, []byte(yaml), 0o600))
	t.Cleanup(func() {
		if p.cmd != nil {
			p.kill()
		}
		if t.Failed() {
			b, _ := os.ReadFile(p.log)
			t.Logf("aip-agent log (last 4 KiB):\n%s", tail(b, 4096))
		}
	})
	return p
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return b
}

// start runs the agent.
func (p *agentProcess) start() {
	p.t.Helper()
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	require.NoError(p.t, err)
	defer logf.Close()
	fmt.Fprintf(logf, "=== start %s\n", time.Now().Format(time.RFC3339Nano))
	p.cmd = exec.Command(p.argv[0], append(p.argv[1:], "--config", p.config)...)
	p.cmd.Stderr, p.cmd.Stdout = logf, logf
	require.NoError(p.t, p.cmd.Start())
	p.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) {
		p.err = cmd.Wait()
		close(exited)
	}(p.cmd, p.exited)
}

// kill stops the agent with SIGKILL, as a power cut would.
func (p *agentProcess) kill() {
	p.cmd.Process.Kill()
	<-p.exited
	p.cmd = nil
}

// term sends SIGTERM and returns how the agent exited.
func (p *agentProcess) term() error {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		p.t.Fatal("aip-agent did not exit within 30s of SIGTERM")
	}
	p.cmd = nil
	return p.err
}

// logged reports whether the agent's log has s.
func (p *agentProcess) logged(s string) bool {
	b, _ := os.ReadFile(p.log)
	return bytes.Contains(b, []byte(s))
}

// count is how many times the agent's log has s.
func (p *agentProcess) count(s string) int {
	b, _ := os.ReadFile(p.log)
	return bytes.Count(b, []byte(s))
}

// waitLogged waits for s in the agent's log.
func (p *agentProcess) waitLogged(s string) {
	p.t.Helper()
	require.Eventually(p.t, func() bool { return p.logged(s) }, 30*time.Second, 10*time.Millisecond, "aip-agent never logged %q", s)
}

// hostPort is the server's address, for a proxy in front of it.
func (c *cluster) hostPort() string { return strings.TrimPrefix(c.http.URL, "http://") }
