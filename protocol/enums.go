package protocol

import "slices"

// ResultStatus is the outcome of one command.
type ResultStatus string

// The values of ResultStatus.
const (
	ResultSuccess ResultStatus = "success"
	ResultFailure ResultStatus = "failure"
	ResultSkipped ResultStatus = "skipped"
	ResultNone    ResultStatus = "none"
)

// TaskStatus is the state a message reports.
type TaskStatus string

// The values of TaskStatus.
const (
	StatusContinue  TaskStatus = "continue"
	StatusCompleted TaskStatus = "completed"
	StatusFailed    TaskStatus = "failed"
	StatusOK        TaskStatus = "ok"
	StatusError     TaskStatus = "error"
)

// ClientMessageType is the type of a message from a client to the server.
type ClientMessageType string

// The values of ClientMessageType.
const (
	ClientTask               ClientMessageType = "task"
	ClientHeartbeat          ClientMessageType = "heartbeat"
	ClientCommandResults     ClientMessageType = "command_results"
	ClientError              ClientMessageType = "error"
	ClientRegister           ClientMessageType = "register"
	ClientTaskEnd            ClientMessageType = "task_end"
	ClientDeviceInfoRequest  ClientMessageType = "device_info_request"
	ClientDeviceInfoResponse ClientMessageType = "device_info_response"
	// ClientTokenRotated is edgeaip's own: a device's answer to
	// ServerRotateToken, on the CBOR wire only: UFO's models, which the JSON wire follows, have no such type.
	ClientTokenRotated ClientMessageType = "token_rotated"
	// ClientLocalCall is edgeaip's own: a device reports a call a local
	// application made to its tools through the agent's own MCP endpoint,
	// for the server's audit log. On the CBOR wire only, as
	// ClientTokenRotated.
	ClientLocalCall ClientMessageType = "local_call"
	// ClientPreparing is edgeaip's own: a device says, of a command it
	// accepted, that it is preparing the tool the command waits for, and
	// how far along it is (Preparing): the server's wait for the command
	// extends for it. On the CBOR wire only, as ClientTokenRotated.
	ClientPreparing ClientMessageType = "preparing"
)

// ServerMessageType is the type of a message from the server to a client.
type ServerMessageType string

// The values of ServerMessageType.
const (
	ServerTask               ServerMessageType = "task"
	ServerHeartbeat          ServerMessageType = "heartbeat"
	ServerTaskEnd            ServerMessageType = "task_end"
	ServerCommand            ServerMessageType = "command"
	ServerError              ServerMessageType = "error"
	ServerDeviceInfoRequest  ServerMessageType = "device_info_request"
	ServerDeviceInfoResponse ServerMessageType = "device_info_response"
	// ServerRotateToken is edgeaip's own: it hands a device a new token,
	// on the CBOR wire only: UFO's models, which the JSON wire follows, have no such type.
	ServerRotateToken ServerMessageType = "rotate_token"
	// ServerCancelCommand is edgeaip's own: it stops the command whose
	// response_id it carries, if the device is running it, on the CBOR
	// wire only. The command's results, failures saying so, answer it.
	ServerCancelCommand ServerMessageType = "cancel_command"
)

// ClientType says whether a client is a device agent or an orchestrator.
type ClientType string

// The values of ClientType.
const (
	ClientDevice        ClientType = "device"
	ClientConstellation ClientType = "constellation"
)

// ToolType is the kind of tool a Command addresses.
type ToolType string

// The values of ToolType.
const (
	ToolDataCollection ToolType = "data_collection"
	ToolAction         ToolType = "action"
)

// ToolTypes lists the tool types in the order tool lookup tries them.
var ToolTypes = [...]ToolType{ToolDataCollection, ToolAction}

// The values of each enum type, for validation, and for the fast decoder
// to share their strings instead of allocating: cborgen finds the array of
// a field's type by its element type, so each type has one.
var (
	resultStatuses     = [...]ResultStatus{ResultSuccess, ResultFailure, ResultSkipped, ResultNone}
	taskStatuses       = [...]TaskStatus{StatusContinue, StatusCompleted, StatusFailed, StatusOK, StatusError}
	clientMessageTypes = [...]ClientMessageType{ClientTask, ClientHeartbeat, ClientCommandResults, ClientError,
		ClientRegister, ClientTaskEnd, ClientDeviceInfoRequest, ClientDeviceInfoResponse, ClientTokenRotated, ClientLocalCall, ClientPreparing}
	serverMessageTypes = [...]ServerMessageType{ServerTask, ServerHeartbeat, ServerTaskEnd, ServerCommand,
		ServerError, ServerDeviceInfoRequest, ServerDeviceInfoResponse, ServerRotateToken, ServerCancelCommand}
	clientTypes = [...]ClientType{ClientDevice, ClientConstellation}
)

// ClientMessageTypes lists every ClientMessageType: for a server that
// must have a rule for each.
func ClientMessageTypes() []ClientMessageType { return slices.Clone(clientMessageTypes[:]) }

func (s ResultStatus) valid() bool { return slices.Contains(resultStatuses[:], s) }

func (s TaskStatus) valid() bool { return slices.Contains(taskStatuses[:], s) }

func (t ClientMessageType) valid() bool { return slices.Contains(clientMessageTypes[:], t) }

func (t ServerMessageType) valid() bool { return slices.Contains(serverMessageTypes[:], t) }

// ours reports whether t is one of edgeaip's own message types, which
// only the CBOR wire carries.
func (t ServerMessageType) ours() bool { return t == ServerRotateToken || t == ServerCancelCommand }

// ours reports whether t is one of edgeaip's own message types, which
// only the CBOR wire carries.
func (t ClientMessageType) ours() bool {
	return t == ClientTokenRotated || t == ClientLocalCall || t == ClientPreparing
}

func (t ClientType) valid() bool { return slices.Contains(clientTypes[:], t) }

// Valid reports whether t is one of the two tool types.
func (t ToolType) Valid() bool { return slices.Contains(ToolTypes[:], t) }
