package protocol

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

func (s ResultStatus) valid() bool {
	switch s {
	case ResultSuccess, ResultFailure, ResultSkipped, ResultNone:
		return true
	}
	return false
}

func (s TaskStatus) valid() bool {
	switch s {
	case StatusContinue, StatusCompleted, StatusFailed, StatusOK, StatusError:
		return true
	}
	return false
}

func (t ClientMessageType) valid() bool {
	switch t {
	case ClientTask, ClientHeartbeat, ClientCommandResults, ClientError, ClientRegister,
		ClientTaskEnd, ClientDeviceInfoRequest, ClientDeviceInfoResponse:
		return true
	}
	return false
}

func (t ServerMessageType) valid() bool {
	switch t {
	case ServerTask, ServerHeartbeat, ServerTaskEnd, ServerCommand, ServerError,
		ServerDeviceInfoRequest, ServerDeviceInfoResponse:
		return true
	}
	return false
}

func (t ClientType) valid() bool { return t == ClientDevice || t == ClientConstellation }

// Valid reports whether t is one of the two tool types.
func (t ToolType) Valid() bool { return t == ToolDataCollection || t == ToolAction }
