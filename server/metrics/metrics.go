// Package metrics holds aip-server's Prometheus metrics, in a registry
// of their own, and serves them in the text exposition format.
//
// The server calls the recording methods where things happen; gauges of
// its state (connected devices, live sessions) are read from it at each
// scrape, so they cannot drift from what the server holds.
package metrics

import (
	"net/http"
	"time"

	"github.com/edgeaip/edgeaip/protocol"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Sources are read at each scrape.
type Sources struct {
	// ConnectedDevices counts the devices online now.
	ConnectedDevices func() int
	// LiveSessions counts the sessions not yet ended that are in state
	// (created or running).
	LiveSessions func(state string) int
	// BlockedSources counts the sources refused now for too many failed
	// authentications.
	BlockedSources func() int
	// StoreWriteFailures counts the writes the database could not take
	// (a full disk, an I/O error) since the server started.
	StoreWriteFailures func() uint64
	// UnrecordedWrites counts the writes the server keeps, to retry until
	// the database takes them.
	UnrecordedWrites func() int
}

// The surfaces authentication failures are counted by: the API (and
// metrics), the dashboard's login, and WebSocket upgrades.
const (
	SurfaceAPI       = "api"
	SurfaceLogin     = "login"
	SurfaceWebSocket = "websocket"
)

// AuthSurfaces lists the surfaces.
var AuthSurfaces = []string{SurfaceAPI, SurfaceLogin, SurfaceWebSocket}

// LiveStates are the states LiveSessions is asked about.
var LiveStates = []string{"created", "running"}

// Metrics are the server's metrics.
type Metrics struct {
	reg             *prometheus.Registry
	handler         http.Handler
	actions         *prometheus.CounterVec
	commandSeconds  *prometheus.HistogramVec
	lateResults     prometheus.Counter
	fuel            *prometheus.CounterVec
	toolWallSeconds *prometheus.CounterVec
	frames          *prometheus.CounterVec
	frameBytes      *prometheus.CounterVec
	// framesIn and framesOut are frames' and frameBytes' counters of each
	// direction, found once: Frame runs for every frame, and a label
	// lookup costs a hash and a lock.
	framesIn, framesOut frameCounters
	sessionsEnded       *prometheus.CounterVec
	authFailures        *prometheus.CounterVec
	authThrottled       *prometheus.CounterVec
	droppedWrites       prometheus.Counter
	mcp                 *mcpMetrics
	cluster             *clusterMetrics // nil on a single node
}

// New registers the metrics, Go runtime and process metrics included, in
// a new registry.
func New(src Sources) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		reg: reg,
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeaip_commands_total",
			Help: "Actions of COMMANDs that ended, by tool and result status (success, failure, skipped); an action that got no answer from its device (offline, timed out) is a failure. A tool its device does not list is counted as unknown.",
		}, []string{"tool", "status"}),
		commandSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "edgeaip_command_duration_seconds",
			Help:    "Time from recording a COMMAND to its end (its results, or its failure), by status: success when every action succeeded.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 12), // 5 ms to 2 min
		}, []string{"status"}),
		lateResults: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgeaip_late_results_total",
			Help: "COMMAND_RESULTS recorded after their command had failed (timed out, or the server restarted): results an agent kept in its outbox.",
		}),
		fuel: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeaip_tool_fuel_total",
			Help: "Sandbox fuel the tool calls consumed, as agents report it in Result.usage, by tool (unknown: one its device does not list).",
		}, []string{"tool"}),
		toolWallSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeaip_tool_wall_seconds_total",
			Help: "Wall time of the tool calls in the sandbox, as agents report it in Result.usage, by tool (unknown: one its device does not list).",
		}, []string{"tool"}),
		frames: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeaip_websocket_frames_total",
			Help: "AIP WebSocket frames read (in) and written (out).",
		}, []string{"direction"}),
		frameBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeaip_websocket_bytes_total",
			Help: "Bytes of AIP WebSocket frames read (in) and written (out), payload only.",
		}, []string{"direction"}),
		sessionsEnded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeaip_sessions_ended_total",
			Help: "Sessions (tasks) that ended, by final state: completed, failed or cancelled.",
		}, []string{"state"}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeaip_auth_failures_total",
			Help: "Failed authentications (a wrong or revoked token), by surface: api, login (the dashboard's), websocket (devices and constellations).",
		}, []string{"surface"}),
		authThrottled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeaip_auth_throttled_total",
			Help: "Requests refused with 429 because their source failed to authenticate too often (20 times within a minute refuses it for a minute), by surface.",
		}, []string{"surface"}),
		droppedWrites: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgeaip_store_unrecorded_dropped_total",
			Help: "Writes the database could not take that the server could not keep either, past its bound on kept writes: results stay in their agent's outbox; a task's end is recorded as \"server restarted\" at the next start.",
		}),
	}
	reg.MustRegister(m.actions, m.commandSeconds, m.lateResults, m.fuel, m.toolWallSeconds, m.frames, m.frameBytes, m.sessionsEnded,
		m.authFailures, m.authThrottled, m.droppedWrites,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "edgeaip_auth_blocked_sources",
			Help: "Sources refused now for too many failed authentications.",
		}, func() float64 { return float64(src.BlockedSources()) }),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "edgeaip_devices_connected",
			Help: "Devices with a registered connection now.",
		}, func() float64 { return float64(src.ConnectedDevices()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "edgeaip_store_write_failures_total",
			Help: "Writes the database could not take (a full disk, an I/O error), retries of kept writes included.",
		}, func() float64 { return float64(src.StoreWriteFailures()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "edgeaip_store_unrecorded_writes",
			Help: "Writes the database could not take that the server keeps and retries until it takes them: devices' results, commands' failures, tasks' ends.",
		}, func() float64 { return float64(src.UnrecordedWrites()) }))
	for _, state := range LiveStates {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "edgeaip_sessions",
			Help:        "Sessions (tasks) not yet ended, by state: created or running.",
			ConstLabels: prometheus.Labels{"state": state},
		}, func() float64 { return float64(src.LiveSessions(state)) }))
	}
	// Every label value that is known in advance shows from the start, at
	// zero, so that rate() sees the first increment.
	m.framesIn = frameCounters{m.frames.WithLabelValues(string(protocol.FrameIn)), m.frameBytes.WithLabelValues(string(protocol.FrameIn))}
	m.framesOut = frameCounters{m.frames.WithLabelValues(string(protocol.FrameOut)), m.frameBytes.WithLabelValues(string(protocol.FrameOut))}
	for _, state := range []string{"completed", "failed", "cancelled"} {
		m.sessionsEnded.WithLabelValues(state)
	}
	for _, surface := range AuthSurfaces {
		m.authFailures.WithLabelValues(surface)
		m.authThrottled.WithLabelValues(surface)
	}
	m.mcp = newMCPMetrics(reg)
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
	return m
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler { return m.handler }

// Registry is where the metrics are registered, for tests and for
// gathering them in-process.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// UnknownTool is the tool label of an action whose tool its device does
// not list: the label takes only names devices announce, not any name an
// operator types, so the series stay bounded.
const UnknownTool = "unknown"

// toolLabel is tools[i], or UnknownTool past its end.
func toolLabel(tools []string, i int) string {
	if i < len(tools) {
		return tools[i]
	}
	return UnknownTool
}

// CommandEnded records a COMMAND that ended after elapsed with results,
// one per action, in the actions' order; tools are the actions' tool
// labels, UnknownTool for a tool the device does not list.
func (m *Metrics) CommandEnded(tools []string, results []protocol.Result, elapsed time.Duration) {
	status := string(protocol.ResultSuccess)
	for i, r := range results {
		m.actions.WithLabelValues(toolLabel(tools, i), string(r.Status)).Inc()
		if r.Status != protocol.ResultSuccess {
			status = string(protocol.ResultFailure)
		}
	}
	m.commandSeconds.WithLabelValues(status).Observe(elapsed.Seconds())
}

// ResultsRecorded records the usage of a device's results, in the
// actions' order, with their tool labels as for CommandEnded; late says
// they came after their command had failed. A negative figure, which
// only a broken or hostile device reports, is not counted: a counter
// cannot go down.
func (m *Metrics) ResultsRecorded(tools []string, results []protocol.Result, late bool) {
	if late {
		m.lateResults.Inc()
	}
	for i, r := range results {
		if r.Usage == nil || r.Usage.WallMicros < 0 {
			continue
		}
		tool := toolLabel(tools, i)
		m.fuel.WithLabelValues(tool).Add(float64(r.Usage.Fuel))
		m.toolWallSeconds.WithLabelValues(tool).Add(float64(r.Usage.WallMicros) / 1e6)
	}
}

// Frame records one WebSocket frame; it fits protocol.ConnOptions.OnFrame.
func (m *Metrics) Frame(dir protocol.FrameDirection, bytes int) {
	c := m.framesOut
	if dir == protocol.FrameIn {
		c = m.framesIn
	}
	c.frames.Inc()
	c.bytes.Add(float64(bytes))
}

// frameCounters count the frames of one direction and their bytes.
type frameCounters struct{ frames, bytes prometheus.Counter }

// UnrecordedDropped records a write the database could not take that
// the server did not keep either: past its bound.
func (m *Metrics) UnrecordedDropped() { m.droppedWrites.Inc() }

// SessionEnded records a session that ended in state.
func (m *Metrics) SessionEnded(state string) {
	m.sessionsEnded.WithLabelValues(state).Inc()
}

// AuthFailed records a failed authentication on surface.
func (m *Metrics) AuthFailed(surface string) {
	m.authFailures.WithLabelValues(surface).Inc()
}

// AuthThrottled records a request on surface refused because its source
// failed to authenticate too often.
func (m *Metrics) AuthThrottled(surface string) {
	m.authThrottled.WithLabelValues(surface).Inc()
}
