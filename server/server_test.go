package server

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	"github.com/edgeaip/edgeaip/server/internal/access"
	"github.com/edgeaip/edgeaip/server/internal/identity"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOperatorTokenIsWrittenOnceWithMode0600(t *testing.T) {
	dir := t.TempDir()
	s1, err := New(context.Background(), Config{DataDir: dir})
	require.NoError(t, err)
	s1.Close()
	path := filepath.Join(dir, AdminTokenFile)
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	first, _ := os.ReadFile(path)
	assert.True(t, strings.HasPrefix(string(first), identity.OperatorTokenPrefix))

	s2, err := New(context.Background(), Config{DataDir: dir})
	require.NoError(t, err)
	defer s2.Close()
	second, _ := os.ReadFile(path)
	assert.Equal(t, first, second, "a restart keeps the operator token")
	c, err := s2.auth.CallerByToken(context.Background(), strings.TrimSpace(string(first)))
	require.NoError(t, err, "and it still works")
	assert.Equal(t, identity.BootstrapIdentity, c.Name)
	assert.Equal(t, access.Admin, c.Role)
}

func TestAPIRefusesWrongOperatorTokens(t *testing.T) {
	c := newTestServer(t).api
	for _, token := range []string{"", "aipo_wrong"} {
		bad := *c
		bad.Token = token
		_, err := bad.Devices(context.Background())
		var se *api.StatusError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, http.StatusUnauthorized, se.Code)
	}
	// UFO's header works too.
	req, _ := http.NewRequest("GET", c.BaseURL+"/api/devices", nil)
	req.Header.Set("X-API-Key", c.Token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
}

func TestEnrollStoresOnlyAHashOfTheToken(t *testing.T) {
	ts := newTestServer(t)
	s, c, dir := ts.srv, ts.api, ts.dir
	resp, err := c.Enroll(context.Background(), api.EnrollRequest{ID: "kiosk-1", Labels: map[string]string{"site": "lobby"}})
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(resp.Token, identity.DeviceTokenPrefix))

	d, err := s.store.Devices().Get(context.Background(), "kiosk-1")
	require.NoError(t, err)
	assert.Equal(t, identity.HashToken(resp.Token), d.TokenHash)
	assert.Equal(t, map[string]string{"site": "lobby"}, d.Labels)
	s.store.Close() // flush WAL so the files hold everything written
	for _, f := range []string{"edgeaip.db", "edgeaip.db-wal"} {
		b, _ := os.ReadFile(filepath.Join(dir, f))
		assert.NotContains(t, string(b), resp.Token, f)
	}
}

func TestEnrollValidatesIDsAndRefusesDuplicates(t *testing.T) {
	c := newTestServer(t).api
	ctx := context.Background()
	_, err := c.Enroll(ctx, api.EnrollRequest{ID: "kiosk-1"})
	require.NoError(t, err)
	for id, code := range map[string]int{"kiosk-1": http.StatusConflict, "": 400, "../etc": 400, ".hidden": 400, "a b": 400} {
		_, err := c.Enroll(ctx, api.EnrollRequest{ID: id})
		var se *api.StatusError
		require.ErrorAs(t, err, &se, id)
		assert.Equal(t, code, se.Code, id)
	}
}

func TestCommandToAnOfflineDeviceIsRecordedWithItsResults(t *testing.T) {
	ts := newTestServer(t)
	s, c := ts.srv, ts.api
	ctx := context.Background()
	_, err := c.Enroll(ctx, api.EnrollRequest{ID: "kiosk-1"})
	require.NoError(t, err)
	resp, err := c.Command(ctx, "kiosk-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "hash_file"}, {ToolName: "list_dir"}}})
	require.NoError(t, err)
	require.Len(t, resp.Results, 2)
	assert.NotEqual(t, resp.Results[0].CallID, resp.Results[1].CallID, "each action gets its own call_id")

	rec, err := s.store.Commands().Get(ctx, resp.ResponseID)
	require.NoError(t, err)
	assert.Equal(t, "kiosk-1", rec.DeviceID)
	assert.Equal(t, resp.SessionID, rec.SessionID)
	assert.Equal(t, `device "kiosk-1" is offline`, rec.Error)
	assert.Equal(t, resp.Results, rec.Results)
	assert.WithinDuration(t, time.Now(), rec.FinishedAt, time.Minute)

	task, err := c.Task(ctx, resp.SessionID)
	require.NoError(t, err)
	assert.Equal(t, api.StateFailed, task.State, "the command ran as a session of its own")
	assert.Equal(t, api.KindCommand, task.Kind)
	require.Len(t, task.Commands, 1)
	assert.Equal(t, resp.ResponseID, task.Commands[0].ResponseID)
}

func TestCommandRequestsAreValidated(t *testing.T) {
	c := newTestServer(t).api
	ctx := context.Background()
	_, err := c.Enroll(ctx, api.EnrollRequest{ID: "kiosk-1"})
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		req  any
		code int
		msg  string
	}{
		"no actions":    {api.CommandRequest{}, 400, "at least one action"},
		"no tool name":  {api.CommandRequest{Actions: []protocol.Command{{}}}, 400, `"actions[0].tool_name": missing`},
		"bad tool type": {api.CommandRequest{Actions: []protocol.Command{{ToolName: "x", ToolType: "magic"}}}, 400, `unknown value "magic"`},
		"bad timeout":   {api.CommandRequest{Actions: []protocol.Command{{ToolName: "x"}}, Timeout: "soon"}, 400, `"timeout"`},
		"long timeout":  {api.CommandRequest{Actions: []protocol.Command{{ToolName: "x"}}, Timeout: "24h0m1s"}, 400, `field "timeout": "24h0m1s" is more than 24h0m0s, the longest a command may take`},
		"unknown field": {map[string]any{"actoins": []any{}}, 400, "unknown field"},
	} {
		err := c.Do(ctx, "POST", "/api/devices/kiosk-1/commands", tc.req, nil)
		var se *api.StatusError
		require.ErrorAs(t, err, &se, name)
		assert.Equal(t, tc.code, se.Code, name)
		assert.Contains(t, se.Message, tc.msg, name)
	}
	err = c.Do(ctx, "POST", "/api/devices/nobody/commands", api.CommandRequest{Actions: []protocol.Command{{ToolName: "x"}}}, nil)
	var se *api.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, http.StatusNotFound, se.Code)
}

// A second server on a live server's data dir must not start: it would
// fail the first's running tasks as "server restarted" while the first
// still runs them.
func TestASecondServerOnTheSameDataDirIsRefusedAndChangesNothing(t *testing.T) {
	ts := newTestServer(t)
	dev := ts.device("kiosk-1")
	ctx := context.Background()
	d, err := ts.api.Dispatch(ctx, api.DispatchRequest{ClientID: "kiosk-1", Request: echoPlan})
	require.NoError(t, err)
	cmd := dev.nextCommand()

	_, err = New(ctx, Config{DataDir: ts.dir})
	require.Error(t, err)
	assert.Equal(t, fmt.Sprintf("server: data dir %s is in use by another process (pid %d)", ts.dir, os.Getpid()), err.Error())

	task, err := ts.api.Task(ctx, d.SessionID)
	require.NoError(t, err)
	assert.Equal(t, api.StateRunning, task.State, "the first server's task is untouched")
	assert.Equal(t, "pending", task.Commands[0].Status)
	dev.answer(cmd, protocol.ResultSuccess, "")
	assert.Equal(t, api.StateCompleted, ts.waitTask(d.SessionID).State, "and runs to its end")
}
