package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/edgeaip/edgeaip/server/api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ufoDirVar names a checkout of microsoft/UFO (testdata/protocol/ufo_wire.py
// names the commit its frames restate) whose own client code the test
// below drives.
const ufoDirVar = "EDGEAIP_UFO_DIR"

// ufoPythonPath copies UFO's aip and galaxy packages from the checkout
// $EDGEAIP_UFO_DIR into a temporary dir, for PYTHONPATH, and skips the
// test, saying why, when there is no checkout or python3 cannot import
// what UFO's client needs: pydantic 2 and websockets. A websockets that
// only Debian's python3 has (python3-websockets) is linked in.
func ufoPythonPath(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(ufoDirVar)
	if dir == "" {
		t.Skipf("%s is not set: this test drives UFO's own galaxy client, from a checkout of microsoft/UFO", ufoDirVar)
	}
	tmp := t.TempDir()
	for _, pkg := range []string{"aip", "galaxy"} {
		require.NoError(t, os.CopyFS(filepath.Join(tmp, pkg), os.DirFS(filepath.Join(dir, pkg))), "%s: a checkout of microsoft/UFO?", dir)
	}
	if exec.Command("python3", "-c", "import websockets").Run() != nil {
		if debian := "/usr/lib/python3/dist-packages/websockets"; exists(debian) {
			require.NoError(t, os.Symlink(debian, filepath.Join(tmp, "websockets")))
		}
	}
	check := exec.Command("python3", "-c", "import pydantic, websockets; assert pydantic.VERSION.startswith('2.'), pydantic.VERSION")
	check.Env = append(os.Environ(), "PYTHONPATH="+tmp)
	if out, err := check.CombinedOutput(); err != nil {
		t.Skipf("python3 cannot import pydantic 2 and websockets, which UFO's client needs (%v: %s); make deps installs python3-websockets", err, bytes.TrimSpace(out))
	}
	return tmp
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// TestUFOsGalaxyClientRunsATaskOnOurServer drives UFO's own galaxy
// client code (its WebSocketConnectionManager and MessageProcessor) against
// our server and agent: it registers as a constellation with ?token=, gets
// the device's info, and runs a task named, as it names them,
// galaxy/task_1/t1; a task that cannot start ends at once with a failure
// it matches, where an ERROR would have left it waiting its timeout.
func TestUFOsGalaxyClientRunsATaskOnOurServer(t *testing.T) {
	pythonPath := ufoPythonPath(t)
	c := newCluster(t)
	c.startAgent("kiosk-1", c.enroll("kiosk-1"))

	plan := `{"steps": [{"tool": "echo", "parameters": {"text": "hello"}}]}`
	cmd := exec.Command("python3", filepath.Join("testdata", "ufo_galaxy_client.py"),
		c.wsURL()+"?token="+url.QueryEscape(c.api.Token), "kiosk-1", plan)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+pythonPath)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "UFO's galaxy client failed:\n%s", stderr.String())
	t.Logf("UFO's galaxy client logged:\n%s", stderr.String())

	var got struct {
		DeviceInfo map[string]any `json:"device_info"`
		T1, T2     struct {
			Status  string
			Error   string
			Result  json.RawMessage
			Seconds float64
		}
	}
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)
	assert.Equal(t, "kiosk-1", got.DeviceInfo["device_id"], "UFO's client got the device's info")
	assert.Equal(t, "completed", got.T1.Status, got.T1.Error)
	assert.Contains(t, string(got.T1.Result), `"hello"`, "the task's result reached UFO's client")
	assert.Equal(t, "failed", got.T2.Status, "a task that cannot start ends, and UFO's client matches its end")
	assert.Contains(t, got.T2.Error, "not a plan")
	assert.Less(t, got.T2.Seconds, 10.0, "it did not wait for its timeout")

	var res api.TaskResult
	require.NoError(t, c.api.Do(context.Background(), "GET", "/api/task_result/galaxy_task_1_t1", nil, &res))
	assert.Equal(t, "done", res.Status)
	task, err := c.api.Task(context.Background(), res.SessionID)
	require.NoError(t, err)
	assert.Equal(t, "galaxy/task_1/t1", task.OriginalTaskName)
	assert.Equal(t, "task_1@t1", task.SessionID)
}
