package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// demoBin lays out what make build makes, for scripts/demo.sh: the three
// binaries, the tools and the example tool in Go, and returns its
// directory.
func demoBin(t *testing.T) string {
	t.Helper()
	bin := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(bin, "tools"), 0o755))
	for _, name := range []string{"aip-server", "aip-agent", "aipctl"} {
		require.NoError(t, os.Symlink(testenv.Command(t, name), filepath.Join(bin, name)))
	}
	for _, name := range testenv.StockTools {
		require.NoError(t, os.Symlink(filepath.Join(testenv.StockToolsDir(t), name+".wasm"), filepath.Join(bin, "tools", name+".wasm")))
	}
	require.NoError(t, os.Symlink(filepath.Join(testenv.Root(), "wasmtools", "examples", "c", "dir_usage", "dir_usage.wasm"),
		filepath.Join(bin, "tools", "dir_usage.wasm")))
	require.NoError(t, os.MkdirAll(filepath.Join(bin, "examples"), 0o755))
	require.NoError(t, os.Symlink(testenv.GoTool(t), filepath.Join(bin, "examples", testenv.GoExampleTool+".wasm")))
	return bin
}

// freePort is a loopback port nothing listens on, as far as can be told.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Item 12 of issue 24: make demo on a busy DEMO_PORT says so at once,
// and what to do, before it starts anything.
func TestTheDemoRefusesABusyPortAtOnce(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	cmd := exec.Command("bash", filepath.Join(testenv.Root(), "scripts", "demo.sh"))
	cmd.Dir = testenv.Root()
	cmd.Env = append(os.Environ(), "BIN="+demoBin(t), fmt.Sprintf("DEMO_PORT=%d", port))
	start := time.Now()
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "%s", out)
	assert.Less(t, time.Since(start), 5*time.Second, "at once")
	assert.Contains(t, string(out), fmt.Sprintf("port %d on 127.0.0.1 is in use: stop what listens there, or run make demo DEMO_PORT=another", port))
	assert.NotContains(t, string(out), "starting aip-server")
}

// Item 12 of issue 24: on a terminal, make demo says why the first call
// of a Go tool takes seconds, then prints the dashboard's URL and keeps
// the server up until Enter.
func TestTheDemoOnATerminalKeepsTheDashboardUpUntilEnter(t *testing.T) {
	port := freePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	term := testenv.NewTerminal(t, testenv.Root(), []string{"BIN=" + demoBin(t), fmt.Sprintf("DEMO_PORT=%d", port)}, "scripts/demo.sh")
	screen := term.WaitFor("the prompt to press Enter", 3*time.Minute, func(s string) bool {
		return strings.Contains(s, "press Enter to stop") || strings.Contains(s, "[exited ")
	})
	require.Contains(t, screen, "press Enter to stop the server and the agent", "the demo failed:\n%s", screen)
	assert.Contains(t, screen, "its first call on a fresh data dir compiles it to machine code")
	assert.Contains(t, screen, "the dashboard: "+url)
	assert.Contains(t, screen, "log in with the operator token: aipo_")

	resp, err := http.Get(url)
	require.NoError(t, err, "the dashboard is up while the demo waits")
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)

	term.Keys("Enter")
	require.Equal(t, 0, term.Exited(time.Minute), term.Screen())
	assert.Contains(t, term.Screen(), "demo ok")
	_, err = http.Get(url)
	assert.Error(t, err, "the server stopped with the demo")
}

// Item 9 of issue 43: a busy port stops each demo with its one message,
// not with "demo failed; logs:" and a tail of logs that do not exist.
func TestTheDemosSayOnlyThatThePortIsBusy(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	for script, want := range map[string]string{
		"demo.sh":         fmt.Sprintf("port %d on 127.0.0.1 is in use: stop what listens there, or run make demo DEMO_PORT=another\n", port),
		"demo-cluster.sh": fmt.Sprintf("port %d on 127.0.0.1 is in use: run make demo-cluster DEMO_CLUSTER_PORT=another (it uses 10 ports from there)\n", port),
	} {
		cmd := exec.Command("bash", filepath.Join(testenv.Root(), "scripts", script))
		cmd.Dir = testenv.Root()
		cmd.Env = append(os.Environ(), "BIN="+demoBin(t), fmt.Sprintf("DEMO_PORT=%d", port), fmt.Sprintf("DEMO_CLUSTER_PORT=%d", port))
		out, err := cmd.CombinedOutput()
		require.Error(t, err, "%s", out)
		assert.Equal(t, want, string(out), script)
	}
}

// Item 10 of issue 43: every variable the demo scripts read is in the
// README, which says what it does.
func TestTheDemosVariablesAreDocumented(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(testenv.Root(), "README.md"))
	require.NoError(t, err)
	for _, script := range []string{"demo.sh", "demo-cluster.sh"} {
		b, err := os.ReadFile(filepath.Join(testenv.Root(), "scripts", script))
		require.NoError(t, err)
		vars := regexp.MustCompile(`\$\{(DEMO_[A-Z_]+)`).FindAllStringSubmatch(string(b), -1)
		require.NotEmpty(t, vars, script)
		for _, v := range vars {
			assert.Contains(t, string(readme), "`"+v[1], "%s reads %s", script, v[1])
		}
	}
}
