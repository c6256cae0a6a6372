package server

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/edgeaip/edgeaip/server/api"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scrape reads /metrics as Prometheus would, with the operator token as a
// bearer token, and parses the text format.
func (ts *testServer) scrape() map[string]*dto.MetricFamily {
	ts.t.Helper()
	req, _ := http.NewRequest("GET", ts.http.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+ts.api.Token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(ts.t, err)
	defer resp.Body.Close()
	require.Equal(ts.t, http.StatusOK, resp.StatusCode)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(ts.t, err)
	return fams
}

// metric returns the value of the series of name whose labels include
// labels (name, value pairs): a counter's or gauge's value, a histogram's
// count. It fails the test if there is no such series.
func metric(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	fam, ok := fams[name]
	require.True(t, ok, "no metric %s", name)
next:
	for _, m := range fam.Metric {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.Label {
				found = found || (lp.GetName() == labels[i] && lp.GetValue() == labels[i+1])
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	t.Fatalf("no series %s%v", name, labels)
	return 0
}

func TestMetricsCountCommandsUsageLateResultsFramesAndSessions(t *testing.T) {
	ts := newTestServer(t)
	code, _ := ts.apiStatus("GET", "/metrics", nil)
	require.Equal(t, http.StatusOK, code)
	resp, err := http.Get(ts.http.URL + "/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "metrics need the operator token")

	dev := ts.device("kiosk-1", tool("stock", "echo", protocol.ToolAction))
	assert.Equal(t, 1.0, metric(t, ts.scrape(), "edgeaip_devices_connected"))

	// A command answered in time, with usage.
	done := make(chan api.CommandResponse, 1)
	go func() {
		r, _ := ts.api.Command(context.Background(), "kiosk-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}})
		done <- r
	}()
	cmd := dev.nextCommand()
	res := dev.results(cmd, protocol.ResultSuccess, "r1")
	res.ActionResults[0].Usage = &protocol.Usage{Fuel: 1200, WallMicros: 3000}
	dev.send(*res)
	require.Equal(t, "success", (<-done).Status)

	// A command whose results come after its timeout: late.
	go func() {
		r, _ := ts.api.Command(context.Background(), "kiosk-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}, Timeout: "50ms"})
		done <- r
	}()
	cmd = dev.nextCommand()
	require.Equal(t, "failure", (<-done).Status, "timed out")
	res = dev.results(cmd, protocol.ResultSuccess, "r2")
	res.ActionResults[0].Usage = &protocol.Usage{Fuel: 34, WallMicros: 1000}
	dev.send(*res)
	dev.ackOf("r2") // the late results are recorded

	// A plan that waits for its device shows as running.
	d := dispatchPlan(t, ts, "kiosk-1", `steps: [{tool: echo}]`)
	cmd = dev.nextCommand()
	fams := ts.scrape()
	assert.Equal(t, 1.0, metric(t, fams, "edgeaip_sessions", "state", "running"))
	assert.Equal(t, 0.0, metric(t, fams, "edgeaip_sessions", "state", "created"))
	dev.answer(cmd, protocol.ResultSuccess, "r3")
	ts.waitTask(d.SessionID)
	// A session is counted as ended, and released, just after its end is
	// recorded, which waitTask sees.
	require.Eventually(t, func() bool {
		fams := ts.scrape()
		return metric(t, fams, "edgeaip_sessions_ended_total", "state", "completed") == 2 &&
			metric(t, fams, "edgeaip_sessions", "state", "running") == 0
	}, 10*time.Second, 10*time.Millisecond)

	fams = ts.scrape()
	assert.Equal(t, 2.0, metric(t, fams, "edgeaip_commands_total", "tool", "echo", "status", "success"))
	assert.Equal(t, 1.0, metric(t, fams, "edgeaip_commands_total", "tool", "echo", "status", "failure"))
	assert.Equal(t, 2.0, metric(t, fams, "edgeaip_command_duration_seconds", "status", "success"))
	assert.Equal(t, 1.0, metric(t, fams, "edgeaip_command_duration_seconds", "status", "failure"))
	assert.Equal(t, 1234.0, metric(t, fams, "edgeaip_tool_fuel_total", "tool", "echo"), "late results' usage counts too")
	assert.InDelta(t, 0.004, metric(t, fams, "edgeaip_tool_wall_seconds_total", "tool", "echo"), 1e-9)
	assert.Equal(t, 1.0, metric(t, fams, "edgeaip_late_results_total"))
	assert.Equal(t, 2.0, metric(t, fams, "edgeaip_sessions_ended_total", "state", "completed"))
	assert.Equal(t, 1.0, metric(t, fams, "edgeaip_sessions_ended_total", "state", "failed"))
	assert.Equal(t, 0.0, metric(t, fams, "edgeaip_sessions", "state", "running"))
	// In: register and three results; out: the register's ack, three
	// commands and three acks (the last one may still be on its way).
	assert.Equal(t, 4.0, metric(t, fams, "edgeaip_websocket_frames_total", "direction", "in"))
	assert.Greater(t, metric(t, fams, "edgeaip_websocket_bytes_total", "direction", "in"), 4.0)
	require.Eventually(t, func() bool {
		return metric(t, ts.scrape(), "edgeaip_websocket_frames_total", "direction", "out") == 7
	}, 10*time.Second, 10*time.Millisecond)

	dev.conn.CloseNow()
	require.Eventually(t, func() bool { return metric(t, ts.scrape(), "edgeaip_devices_connected") == 0 }, 10*time.Second, 10*time.Millisecond)
}

// A device's Result.usage is its word: a negative or absurd figure must
// neither crash the server (a Prometheus counter panics when it would
// decrease) nor reach the metrics or the store, and the results still
// count.
func TestImplausibleUsageIsDroppedAndTheResultsRecorded(t *testing.T) {
	ts := newTestServer(t)
	dev := ts.device("kiosk-1", tool("stock", "echo", protocol.ToolAction))
	// Each command after the first shows the link and the server still up.
	for i, u := range []protocol.Usage{
		{Fuel: 10, WallMicros: -5},
		{Fuel: 10, StdoutBytes: -1},
		{Fuel: 10, MemoryPages: 1 << 20},
		{Fuel: 1 << 60},
		{Fuel: 10, WallMicros: int64(30 * 24 * time.Hour / time.Microsecond)},
	} {
		done := make(chan api.CommandResponse, 1)
		go func() {
			r, _ := ts.api.Command(context.Background(), "kiosk-1", api.CommandRequest{Actions: []protocol.Command{{ToolName: "echo"}}})
			done <- r
		}()
		cmd := dev.nextCommand()
		res := dev.results(cmd, protocol.ResultSuccess, "r")
		res.ActionResults[0].Usage = &u
		dev.send(*res)
		resp := <-done
		require.Equal(t, "success", resp.Status, "usage %d: %+v", i, u)
		assert.Nil(t, resp.Results[0].Usage, "usage %d: %+v", i, u)
	}
	fams := ts.scrape()
	assert.Equal(t, 5.0, metric(t, fams, "edgeaip_commands_total", "tool", "echo", "status", "success"))
	assert.NotContains(t, fams, "edgeaip_tool_fuel_total", "no implausible usage is counted")
	assert.NotContains(t, fams, "edgeaip_tool_wall_seconds_total", "no implausible usage is counted")
	assert.Contains(t, ts.logs.String(), "usage dropped")
}

// Any name an operator types must not become a series: tools that the
// device does not list are counted as "unknown". Admission refuses such a
// command; one still reaches the dispatcher when the device's inventory
// changed since it was admitted, which the commands here, run below
// admission, stand for.
func TestToolsTheDeviceDoesNotListAreCountedAsUnknown(t *testing.T) {
	ts := newTestServer(t)
	dev := ts.device("kiosk-1", tool("stock", "echo", protocol.ToolAction))
	dev.serveOK()
	ctx := context.Background()
	resp, err := ts.srv.sessions.RunUnadmitted(ctx, operatorCommand("kiosk-1"), []protocol.Command{{ToolName: "echo"}, {ToolName: "nosuchtool"}}, time.Minute)
	require.NoError(t, err)
	require.Equal(t, "success", resp.Status)
	dev.conn.CloseNow()
	require.Eventually(t, func() bool { return metric(t, ts.scrape(), "edgeaip_devices_connected") == 0 }, 10*time.Second, 10*time.Millisecond)
	// Offline: its last registration's inventory still tells.
	_, err = ts.srv.sessions.RunUnadmitted(ctx, operatorCommand("kiosk-1"), []protocol.Command{{ToolName: "echo"}, {ToolName: "other"}}, 100*time.Millisecond)
	require.NoError(t, err)

	fams := ts.scrape()
	assert.Equal(t, 1.0, metric(t, fams, "edgeaip_commands_total", "tool", "echo", "status", "success"))
	assert.Equal(t, 1.0, metric(t, fams, "edgeaip_commands_total", "tool", "echo", "status", "failure"))
	assert.Equal(t, 1.0, metric(t, fams, "edgeaip_commands_total", "tool", "unknown", "status", "success"))
	assert.Equal(t, 1.0, metric(t, fams, "edgeaip_commands_total", "tool", "unknown", "status", "failure"))
	for _, m := range fams["edgeaip_commands_total"].Metric {
		for _, l := range m.Label {
			if l.GetName() == "tool" {
				assert.Contains(t, []string{"echo", "unknown"}, l.GetValue())
			}
		}
	}
}
