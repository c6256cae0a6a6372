package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/agent"
	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/sandbox"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The agent built for ARM and RISC-V boards runs under qemu-user, wazero
// compiling for arm64 and interpreting for armv7 and riscv64, and a tool
// call gives the same result and burns the same fuel as on this machine,
// for a tool in Go (whose runtime reads the clocks: reproducible ones
// here) as for one in C: fuel budgets hold for a mixed fleet.
func TestBoardAgentsUnderQemuGiveTheSameResultAndFuel(t *testing.T) {
	c := newCluster(t)
	files := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(files, "config.txt"), []byte("kiosk config v1\n"), 0o644))
	tools := t.TempDir() // just the two: instrumenting under emulation is slow
	for _, src := range []string{testenv.GoTool(t), testenv.StockTool("hash_file")} {
		b, err := os.ReadFile(src)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(tools, filepath.Base(src)), b, 0o644))
	}
	params := map[string]any{"path": filepath.Join(files, "config.txt")}
	names := []string{testenv.GoExampleTool, "hash_file"}

	c.startAgent("native-1", c.enroll("native-1"), withMounts(sandbox.Mount{HostPath: files, GuestPath: files}),
		func(cfg *agent.Config) { cfg.Reproducible, cfg.ToolDirs = true, []string{"stock=" + tools} })
	want := map[string]protocol.Result{}
	for _, name := range names {
		want[name] = onlyResult(t, c.exec("native-1", name, params, time.Minute))
		require.Equal(t, protocol.ResultSuccess, want[name].Status, want[name].Error)
	}

	for _, board := range []struct{ goarch, qemu string }{
		{"arm64", "qemu-aarch64-static"}, {"arm", "qemu-arm-static"}, {"riscv64", "qemu-riscv64-static"},
	} {
		t.Run(board.goarch, func(t *testing.T) {
			qemu, err := exec.LookPath(board.qemu)
			if err != nil {
				t.Skipf("%s is not installed; make deps installs it (apt-get install qemu-user-static): %v", board.qemu, err)
			}
			id := board.goarch + "-1"
			yaml := fmt.Sprintf(`device: {id: %s}
server: {url: %q, token_file: %q}
data_dir: %q
tools:
  dirs: [%q]
  allow_dirs: [%q]
  reproducible: true
  limits: {timeout: 5m}
`, id, c.wsURL(), c.enroll(id), t.TempDir(), "stock="+tools, files)
			p := newAgentProcess(t, yaml)
			p.argv = []string{qemu, agentBinaryFor(t, board.goarch)}
			p.start()
			waitOnlineWithin(t, c, id, 5*time.Minute)

			for _, name := range names {
				got := onlyResult(t, c.exec(id, name, params, 5*time.Minute))
				require.Equal(t, protocol.ResultSuccess, got.Status, got.Error)
				assert.Equal(t, want[name].Result, got.Result, name)
				require.NotNil(t, got.Usage)
				assert.Equal(t, want[name].Usage.Fuel, got.Usage.Fuel, "%s: the same fuel on %s as on this machine", name, board.goarch)
				t.Logf("%s %s: fuel %d, wall %s", board.goarch, name, got.Usage.Fuel, time.Duration(got.Usage.WallMicros)*time.Microsecond)
			}
		})
	}
}

// waitOnlineWithin waits for a device that may be slow to start, such as
// one emulated by qemu.
func waitOnlineWithin(t *testing.T, c *cluster, id string, d time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool { return c.device(id).Online }, d, 50*time.Millisecond, "device %s never came online", id)
}
