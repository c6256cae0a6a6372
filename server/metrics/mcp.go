package metrics

import "github.com/prometheus/client_golang/prometheus"

// mcpMetrics count what the MCP surfaces do: the server's gateway (/mcp)
// and the calls applications made through agents' own endpoints.
type mcpMetrics struct {
	calls      *prometheus.CounterVec
	limited    *prometheus.CounterVec
	localCalls prometheus.Counter
	sessions   prometheus.Gauge
	evicted    *prometheus.CounterVec
	refused    *prometheus.CounterVec
}

// The outcomes of a gateway call: a result (isError or not), or an MCP
// error (refused input, an unknown tool or device, a scope).
const (
	MCPResult = "result"
	MCPFailed = "failed"
	MCPError  = "error"
)

func newMCPMetrics(reg *prometheus.Registry) *mcpMetrics {
	m := &mcpMetrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeaip_mcp_calls_total",
			Help: "Tool calls on the MCP gateway (/mcp), by gateway tool (a device's tool called directly counts as device_tool) and outcome: result, failed (a result with isError) or error (an MCP error: bad input, not found, not allowed).",
		}, []string{"tool", "outcome"}),
		limited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeaip_mcp_calls_limited_total",
			Help: "Tool calls on the MCP gateway refused by their identity's limits, by limit: per_minute or at_once.",
		}, []string{"limit"}),
		localCalls: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "edgeaip_local_calls_total",
			Help: "Calls applications on devices made through their agent's own MCP endpoint, as the devices reported them (local_call), each counted once.",
		}),
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "edgeaip_mcp_sessions",
			Help: "Sessions the MCP gateway holds (the initialize-era revisions'), until their DELETE, their identity's revocation or their idle TTL.",
		}),
		evicted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeaip_mcp_sessions_evicted_total",
			Help: "MCP sessions the gateway dropped, the oldest idle one, to make room for a new one past a bound: identity (--mcp-max-sessions-per-identity) or node (--mcp-max-sessions).",
		}, []string{"bound"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeaip_mcp_sessions_refused_total",
			Help: "New MCP sessions the gateway refused with 429, past a bound whose sessions were all busy: identity or node.",
		}, []string{"bound"}),
	}
	reg.MustRegister(m.calls, m.limited, m.localCalls, m.sessions, m.evicted, m.refused)
	for _, l := range []string{"per_minute", "at_once"} {
		m.limited.WithLabelValues(l)
	}
	for _, b := range []string{"identity", "node"} {
		m.evicted.WithLabelValues(b)
		m.refused.WithLabelValues(b)
	}
	return m
}

// MCPCall counts a gateway tool call by its outcome.
func (m *Metrics) MCPCall(tool, outcome string) { m.mcp.calls.WithLabelValues(tool, outcome).Inc() }

// MCPLimited counts a gateway call an identity's limit refused.
func (m *Metrics) MCPLimited(limit string) { m.mcp.limited.WithLabelValues(limit).Inc() }

// LocalCalls counts n local calls recorded.
func (m *Metrics) LocalCalls(n int) { m.mcp.localCalls.Add(float64(n)) }

// MCPSessions adds n (negative: removes) to the MCP sessions held.
func (m *Metrics) MCPSessions(n int) { m.mcp.sessions.Add(float64(n)) }

// MCPSessionEvicted counts a session dropped for a new one past bound
// ("identity" or "node").
func (m *Metrics) MCPSessionEvicted(bound string) { m.mcp.evicted.WithLabelValues(bound).Inc() }

// MCPSessionRefused counts a new session refused past bound.
func (m *Metrics) MCPSessionRefused(bound string) { m.mcp.refused.WithLabelValues(bound).Inc() }
