package protocol

import "time"

// The CBOR fast path's code for these structs is generated from them: run
// go generate ./protocol after changing one (RATIONALE.md, "Generated
// per-field code").
//go:generate go run ./internal/cborgen -o cbor_fast_gen.go ServerMessage ClientMessage

// The model follows UFO's pydantic classes field for field and in the same
// order. How a pydantic Optional maps to Go:
//
//   - Optional[str] is a string: null, missing and "" are one value, and
//     nothing is sent for it (omitempty).
//   - Optional[List] and Optional[Dict] are a slice or map: null and missing
//     decode to nil and are not sent; [] and {} stay empty but non-nil and
//     are sent as such (omitzero), as pydantic keeps None apart from [].
//   - Any is an any: only nil is left out (omitzero), so a result of false,
//     0, "" or [] survives the round trip.

// Command is one action for a device to run.
type Command struct {
	ToolName   string         `cbor:"tool_name" json:"tool_name"`
	Parameters map[string]any `cbor:"parameters,omitzero" json:"parameters,omitzero"`
	// ToolType may be empty on the wire, unlike in UFO's model: the agent
	// then looks the tool up under each type in turn, as UFO's
	// Computer.command2tool does. See RATIONALE.md.
	ToolType ToolType `cbor:"tool_type,omitempty" json:"tool_type,omitempty"`
	CallID   string   `cbor:"call_id,omitempty" json:"call_id,omitempty"`
}

// Result is the outcome of one Command, matched to it by CallID.
type Result struct {
	Status    ResultStatus `cbor:"status" json:"status"`
	Error     string       `cbor:"error,omitempty" json:"error,omitempty"`
	Result    any          `cbor:"result,omitzero" json:"result,omitzero"`
	Namespace string       `cbor:"namespace,omitempty" json:"namespace,omitempty"`
	CallID    string       `cbor:"call_id,omitempty" json:"call_id,omitempty"`
	// Usage is edgeaip's extension: what the sandbox measured for the call.
	// UFO's pydantic model ignores it.
	Usage *Usage `cbor:"usage,omitempty" json:"usage,omitempty"`
}

// Usage is what one tool call consumed, as measured by the sandbox.
type Usage struct {
	Fuel        uint64 `cbor:"fuel" json:"fuel"`
	WallMicros  int64  `cbor:"wall_us" json:"wall_us"`
	MemoryPages uint32 `cbor:"memory_pages" json:"memory_pages"`
	StdoutBytes int64  `cbor:"stdout_bytes" json:"stdout_bytes"`
}

// ServerMessage is every message the server sends to a client.
type ServerMessage struct {
	Type        ServerMessageType `cbor:"type" json:"type"`
	Status      TaskStatus        `cbor:"status" json:"status"`
	UserRequest string            `cbor:"user_request,omitempty" json:"user_request,omitempty"`
	AgentName   string            `cbor:"agent_name,omitempty" json:"agent_name,omitempty"`
	ProcessName string            `cbor:"process_name,omitempty" json:"process_name,omitempty"`
	RootName    string            `cbor:"root_name,omitempty" json:"root_name,omitempty"`
	Actions     []Command         `cbor:"actions,omitzero" json:"actions,omitzero"`
	Messages    []string          `cbor:"messages,omitzero" json:"messages,omitzero"`
	Error       string            `cbor:"error,omitempty" json:"error,omitempty"`
	SessionID   string            `cbor:"session_id,omitempty" json:"session_id,omitempty"`
	TaskName    string            `cbor:"task_name,omitempty" json:"task_name,omitempty"`
	// Timestamp is RFC 3339 in UTC when we send it (see [Now]); a received
	// one is kept as it came.
	Timestamp  string `cbor:"timestamp,omitempty" json:"timestamp,omitempty"`
	ResponseID string `cbor:"response_id,omitempty" json:"response_id,omitempty"`
	Result     any    `cbor:"result,omitzero" json:"result,omitzero"`
	// Token is edgeaip's own, not UFO's: the device's new token, in a
	// ServerRotateToken, which only the CBOR wire carries.
	Token string `cbor:"token,omitempty" json:"token,omitempty"`
}

// ClientMessage is every message a device agent or a constellation client
// sends to the server.
type ClientMessage struct {
	Type   ClientMessageType `cbor:"type" json:"type"`
	Status TaskStatus        `cbor:"status" json:"status"`
	// ClientType defaults to device when missing or null.
	ClientType     ClientType     `cbor:"client_type,omitempty" json:"client_type,omitempty"`
	SessionID      string         `cbor:"session_id,omitempty" json:"session_id,omitempty"`
	TaskName       string         `cbor:"task_name,omitempty" json:"task_name,omitempty"`
	ClientID       string         `cbor:"client_id,omitempty" json:"client_id,omitempty"`
	TargetID       string         `cbor:"target_id,omitempty" json:"target_id,omitempty"`
	Request        string         `cbor:"request,omitempty" json:"request,omitempty"`
	ActionResults  []Result       `cbor:"action_results,omitzero" json:"action_results,omitzero"`
	Timestamp      string         `cbor:"timestamp,omitempty" json:"timestamp,omitempty"`
	RequestID      string         `cbor:"request_id,omitempty" json:"request_id,omitempty"`
	PrevResponseID string         `cbor:"prev_response_id,omitempty" json:"prev_response_id,omitempty"`
	Error          string         `cbor:"error,omitempty" json:"error,omitempty"`
	Metadata       map[string]any `cbor:"metadata,omitzero" json:"metadata,omitzero"`
	// Actions is edgeaip's own, not UFO's: in a ClientLocalCall, which
	// only the CBOR wire carries, the call a local application made, whose
	// Result is in ActionResults.
	Actions []Command `cbor:"actions,omitzero" json:"actions,omitzero"`
	// Preparing is edgeaip's own, not UFO's: in a ClientPreparing, which
	// only the CBOR wire carries, how far the device has come preparing
	// the tool of the command named by PrevResponseID.
	Preparing *Preparing `cbor:"preparing,omitempty" json:"preparing,omitempty"`
}

// Preparing is how far a device has come preparing a tool that a command
// it accepted waits for: step Step of Steps, at Stage (one of
// PreparingStages; PreparingReady once it is done, when the tool's own
// timeout starts).
type Preparing struct {
	ToolName string `cbor:"tool_name" json:"tool_name"`
	Stage    string `cbor:"stage" json:"stage"`
	Step     uint32 `cbor:"step" json:"step"`
	Steps    uint32 `cbor:"steps" json:"steps"`
}

// PreparingReady is the stage of a Preparing that says the tool is
// prepared.
const PreparingReady = "ready"

// PreparingStages are the stages a Preparing may say, in order: the
// tool waits its turn, its module is instrumented for fuel, it is
// initialized (a tool that starts from a snapshot), its code compiled,
// and it is ready.
var PreparingStages = [...]string{"queued", "instrumenting", "initializing", "compiling", PreparingReady}

// MCPToolInfo describes one tool a device offers, as UFO's Computer lists it.
type MCPToolInfo struct {
	ToolKey      string         `cbor:"tool_key" json:"tool_key"`
	ToolName     string         `cbor:"tool_name" json:"tool_name"`
	Title        string         `cbor:"title,omitempty" json:"title,omitempty"`
	Namespace    string         `cbor:"namespace" json:"namespace"`
	ToolType     ToolType       `cbor:"tool_type" json:"tool_type"`
	Description  string         `cbor:"description,omitempty" json:"description,omitempty"`
	InputSchema  map[string]any `cbor:"input_schema,omitzero" json:"input_schema,omitzero"`
	OutputSchema map[string]any `cbor:"output_schema,omitzero" json:"output_schema,omitzero"`
	Meta         map[string]any `cbor:"meta,omitzero" json:"meta,omitzero"`
	Annotations  map[string]any `cbor:"annotations,omitzero" json:"annotations,omitzero"`
}

// ToolKey is the registry key of a tool: "tool_type::tool_name".
func ToolKey(t ToolType, name string) string { return string(t) + "::" + name }

// SystemInfo describes a device. The agent sends it in the register
// message's metadata under [MetadataSystemInfo]. The fields up to
// CustomMetadata are UFO's DeviceSystemInfo, which has no optional field;
// the rest are edgeaip's.
type SystemInfo struct {
	DeviceID          string         `cbor:"device_id" json:"device_id"`
	Platform          string         `cbor:"platform" json:"platform"`
	OSVersion         string         `cbor:"os_version" json:"os_version"`
	CPUCount          int            `cbor:"cpu_count" json:"cpu_count"`
	MemoryTotalGB     float64        `cbor:"memory_total_gb" json:"memory_total_gb"`
	Hostname          string         `cbor:"hostname" json:"hostname"`
	IPAddress         string         `cbor:"ip_address" json:"ip_address"`
	SupportedFeatures []string       `cbor:"supported_features" json:"supported_features"`
	PlatformType      string         `cbor:"platform_type" json:"platform_type"`
	SchemaVersion     string         `cbor:"schema_version" json:"schema_version"`
	CustomMetadata    map[string]any `cbor:"custom_metadata" json:"custom_metadata"`

	Arch         string            `cbor:"arch" json:"arch"`
	AgentVersion string            `cbor:"agent_version" json:"agent_version"`
	Labels       map[string]string `cbor:"labels,omitzero" json:"labels,omitzero"`
	Tools        []MCPToolInfo     `cbor:"tools" json:"tools"`
}

// MetadataSystemInfo is the register metadata key that holds a SystemInfo.
const MetadataSystemInfo = "system_info"

// Now returns the current time as AIP timestamps carry it: RFC 3339, UTC.
func Now() string { return time.Now().UTC().Format(time.RFC3339Nano) }
