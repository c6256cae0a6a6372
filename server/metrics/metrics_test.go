package metrics

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testMetrics() *Metrics {
	live := map[string]int{"created": 2, "running": 3}
	return New(Sources{ConnectedDevices: func() int { return 4 }, LiveSessions: func(s string) int { return live[s] },
		BlockedSources: func() int { return 0 }, StoreWriteFailures: func() uint64 { return 6 }, UnrecordedWrites: func() int { return 2 }})
}

func TestTheExpositionCarriesWhatWasRecorded(t *testing.T) {
	m := testMetrics()
	tools := []string{"hash_file", "read_file"}
	results := []protocol.Result{
		{Status: protocol.ResultSuccess, Usage: &protocol.Usage{Fuel: 1500, WallMicros: 250000}},
		{Status: protocol.ResultFailure, Usage: &protocol.Usage{Fuel: 500, WallMicros: 500000}},
	}
	m.CommandEnded(tools, results, 40*time.Millisecond)
	m.ResultsRecorded(tools, results, false)
	m.ResultsRecorded(tools[:1], results[:1], true)
	// A negative wall time from a broken device is not counted, and does
	// not panic as the counter would.
	m.ResultsRecorded(tools[:1], []protocol.Result{{Status: protocol.ResultSuccess, Usage: &protocol.Usage{Fuel: 7, WallMicros: -5}}}, false)
	m.Frame(protocol.FrameIn, 100)
	m.Frame(protocol.FrameIn, 20)
	m.Frame(protocol.FrameOut, 7)
	m.SessionEnded("completed")
	m.UnrecordedDropped()

	want := `
# HELP edgeaip_commands_total Actions of COMMANDs that ended, by tool and result status (success, failure, skipped); an action that got no answer from its device (offline, timed out) is a failure. A tool its device does not list is counted as unknown.
# TYPE edgeaip_commands_total counter
edgeaip_commands_total{status="failure",tool="read_file"} 1
edgeaip_commands_total{status="success",tool="hash_file"} 1
# HELP edgeaip_devices_connected Devices with a registered connection now.
# TYPE edgeaip_devices_connected gauge
edgeaip_devices_connected 4
# HELP edgeaip_late_results_total COMMAND_RESULTS recorded after their command had failed (timed out, or the server restarted): results an agent kept in its outbox.
# TYPE edgeaip_late_results_total counter
edgeaip_late_results_total 1
# HELP edgeaip_sessions Sessions (tasks) not yet ended, by state: created or running.
# TYPE edgeaip_sessions gauge
edgeaip_sessions{state="created"} 2
edgeaip_sessions{state="running"} 3
# HELP edgeaip_sessions_ended_total Sessions (tasks) that ended, by final state: completed, failed or cancelled.
# TYPE edgeaip_sessions_ended_total counter
edgeaip_sessions_ended_total{state="cancelled"} 0
edgeaip_sessions_ended_total{state="completed"} 1
edgeaip_sessions_ended_total{state="failed"} 0
# HELP edgeaip_store_unrecorded_dropped_total Writes the database could not take that the server could not keep either, past its bound on kept writes: results stay in their agent's outbox; a task's end is recorded as "server restarted" at the next start.
# TYPE edgeaip_store_unrecorded_dropped_total counter
edgeaip_store_unrecorded_dropped_total 1
# HELP edgeaip_store_unrecorded_writes Writes the database could not take that the server keeps and retries until it takes them: devices' results, commands' failures, tasks' ends.
# TYPE edgeaip_store_unrecorded_writes gauge
edgeaip_store_unrecorded_writes 2
# HELP edgeaip_store_write_failures_total Writes the database could not take (a full disk, an I/O error), retries of kept writes included.
# TYPE edgeaip_store_write_failures_total counter
edgeaip_store_write_failures_total 6
# HELP edgeaip_tool_fuel_total Sandbox fuel the tool calls consumed, as agents report it in Result.usage, by tool (unknown: one its device does not list).
# TYPE edgeaip_tool_fuel_total counter
edgeaip_tool_fuel_total{tool="hash_file"} 3000
edgeaip_tool_fuel_total{tool="read_file"} 500
# HELP edgeaip_tool_wall_seconds_total Wall time of the tool calls in the sandbox, as agents report it in Result.usage, by tool (unknown: one its device does not list).
# TYPE edgeaip_tool_wall_seconds_total counter
edgeaip_tool_wall_seconds_total{tool="hash_file"} 0.5
edgeaip_tool_wall_seconds_total{tool="read_file"} 0.5
# HELP edgeaip_websocket_bytes_total Bytes of AIP WebSocket frames read (in) and written (out), payload only.
# TYPE edgeaip_websocket_bytes_total counter
edgeaip_websocket_bytes_total{direction="in"} 120
edgeaip_websocket_bytes_total{direction="out"} 7
# HELP edgeaip_websocket_frames_total AIP WebSocket frames read (in) and written (out).
# TYPE edgeaip_websocket_frames_total counter
edgeaip_websocket_frames_total{direction="in"} 2
edgeaip_websocket_frames_total{direction="out"} 1
`
	names := []string{"edgeaip_commands_total", "edgeaip_devices_connected", "edgeaip_late_results_total", "edgeaip_sessions",
		"edgeaip_sessions_ended_total", "edgeaip_store_unrecorded_dropped_total", "edgeaip_store_unrecorded_writes",
		"edgeaip_store_write_failures_total", "edgeaip_tool_fuel_total", "edgeaip_tool_wall_seconds_total",
		"edgeaip_websocket_bytes_total", "edgeaip_websocket_frames_total"}
	require.NoError(t, testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), names...))

	n, err := testutil.GatherAndCount(m.Registry(), "edgeaip_command_duration_seconds")
	require.NoError(t, err)
	assert.Equal(t, 1, n, "one histogram, status failure")
}

func TestTheMetricsFollowPrometheusConventions(t *testing.T) {
	m := testMetrics()
	m.CommandEnded([]string{"x"}, []protocol.Result{{Status: protocol.ResultSuccess}}, time.Second)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	require.Equal(t, 200, rec.Code)
	assert.Contains(t, rec.Header().Get("Content-Type"), "text/plain")
	problems, err := promlint.New(rec.Body).Lint()
	require.NoError(t, err)
	assert.Empty(t, problems)
}

// The recording methods run on every command and frame.
func BenchmarkCommandEnded(b *testing.B) {
	m := testMetrics()
	tools := []string{"hash_file"}
	results := []protocol.Result{{Status: protocol.ResultSuccess, Usage: &protocol.Usage{Fuel: 10, WallMicros: 100}}}
	for b.Loop() {
		m.CommandEnded(tools, results, time.Millisecond)
		m.ResultsRecorded(tools, results, false)
	}
}

func BenchmarkFrame(b *testing.B) {
	m := testMetrics()
	for b.Loop() {
		m.Frame(protocol.FrameIn, 200)
	}
}
