package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"testing"

	"github.com/edgeaip/edgeaip/internal/testenv"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A server that hangs mid-command (here stopped with SIGSTOP once the
// device has the command, whose tool takes seconds to prepare) is
// noticed by aipctl exec within its --server-silence, not after the
// command's timeout and the whole preparation bound: it exits 3, says
// that the outcome is unknown, and how to get it without running the
// command twice.
func TestAipctlGivesUpOnAServerThatStopsAnsweringMidCommand(t *testing.T) {
	srv := startServerProcess(t, testenv.Command(t, "aip-server"), "127.0.0.1:0", t.TempDir())
	tokenFile := srv.enroll(t, "kiosk-1")
	// initslow must still take seconds to prepare when the command
	// comes: the agent prepares almost nothing before it registers.
	yaml := agentYAMLWithTools(t, "kiosk-1", srv.wsURL(), tokenFile, t.TempDir(), t.TempDir(), "slow="+initslowDir(t)) +
		fmt.Sprintf("  limits: {fuel: %d}\n  prepare_before_register: 1ms\n", initslowFuel)
	agent := newAgentProcess(t, yaml)
	agent.start()
	agent.waitLogged("msg=registered")

	ctl := exec.Command(testenv.Command(t, "aipctl"), "--server", srv.api.BaseURL, "--server-silence", "3s",
		"exec", "kiosk-1", "initslow", "--idempotency-key", "the-key")
	ctl.Env = append(ctl.Environ(), "AIP_TOKEN="+srv.api.Token)
	var stderr bytes.Buffer
	ctl.Stderr = &stderr
	require.NoError(t, ctl.Start())
	agent.waitLogged(`msg="command received"`)
	require.NoError(t, srv.cmd.Process.Signal(syscall.SIGSTOP))
	t.Cleanup(func() { srv.cmd.Process.Signal(syscall.SIGCONT) })

	err := ctl.Wait()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "aipctl exec failed: %v\n%s", err, stderr.String())
	assert.Equal(t, 3, exit.ExitCode(), stderr.String())
	assert.Contains(t, stderr.String(), "server stopped answering: it answered neither the call nor GET /api/health for 3s")
	assert.Contains(t, stderr.String(), "its outcome is unknown")
	assert.Contains(t, stderr.String(), "--idempotency-key the-key")
}
