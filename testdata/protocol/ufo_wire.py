#!/usr/bin/env python3
"""UFO's AIP wire as pydantic v2 emits and accepts it.

The models below restate, field for field and in declaration order, the
pydantic models of microsoft/UFO's aip/messages.py (the wire contract) at
UFO_COMMIT; they are not UFO's code. Needs Python 3.10+ and pydantic: UFO
uses pydantic 2, and the frames committed are written with it; pydantic 1
(what Debian 12 ships) checks and validates the same frames here, though
it coerces more loosely than 2 when it validates.

The frames of galaxy/ are those of a UFO galaxy (constellation) client's
TASK path, as UFO's own code builds them at commit UFO_COMMIT: what its
galaxy client sends (galaxy/client/components/connection_manager.py) and
what UFO's server answers (ufo/server/ws/handler.py, through
aip/protocol/registration.py, base.py and task_execution.py). They are
UFO's side only: our server is tested against them (server/ufo_galaxy_test.go).

  python3 ufo_wire.py write      # (re)write NAME.ufo.json and galaxy/NAME.ufo.json; needs pydantic 2
  python3 ufo_wire.py check      # every NAME.json (ours) validates and equals NAME.ufo.json
  python3 ufo_wire.py validate   # stdin: lines "server JSON" or "client JSON"; exit 1 if one is refused
"""

import json
import pathlib
import sys
from enum import Enum
from typing import Any, Dict, List, Literal, Optional

import pydantic
from pydantic import BaseModel, Field

PYDANTIC_2 = pydantic.VERSION.startswith("2.")

# The commit of microsoft/UFO whose wire this restates.
UFO_COMMIT = "b28183fd426452c6cb511627c9bd32a929f29406"


def dump_json(msg):
    """The frame pydantic 2's model_dump_json() emits; pydantic 1 is told to match it."""
    if PYDANTIC_2:
        return msg.model_dump_json()
    return json.dumps(msg.dict(), default=lambda e: e.value, separators=(",", ":"), ensure_ascii=False)


def load_json(model, frame):
    """Validates one JSON frame as UFO's side would."""
    return model.model_validate_json(frame) if PYDANTIC_2 else model.parse_raw(frame)


class Command(BaseModel):
    tool_name: str
    parameters: Optional[Dict[str, Any]] = None
    tool_type: Literal["data_collection", "action"]
    call_id: Optional[str] = None


class ResultStatus(str, Enum):
    SUCCESS = "success"
    FAILURE = "failure"
    SKIPPED = "skipped"
    NONE = "none"


class Result(BaseModel):
    status: ResultStatus
    error: Optional[str] = None
    result: Any = None
    namespace: Optional[str] = None
    call_id: Optional[str] = None


class TaskStatus(str, Enum):
    CONTINUE = "continue"
    COMPLETED = "completed"
    FAILED = "failed"
    OK = "ok"
    ERROR = "error"


class ClientMessageType(str, Enum):
    TASK = "task"
    HEARTBEAT = "heartbeat"
    COMMAND_RESULTS = "command_results"
    ERROR = "error"
    REGISTER = "register"
    TASK_END = "task_end"
    DEVICE_INFO_REQUEST = "device_info_request"
    DEVICE_INFO_RESPONSE = "device_info_response"


class ServerMessageType(str, Enum):
    TASK = "task"
    HEARTBEAT = "heartbeat"
    TASK_END = "task_end"
    COMMAND = "command"
    ERROR = "error"
    DEVICE_INFO_REQUEST = "device_info_request"
    DEVICE_INFO_RESPONSE = "device_info_response"


class ClientType(str, Enum):
    DEVICE = "device"
    CONSTELLATION = "constellation"


class ServerMessage(BaseModel):
    type: ServerMessageType
    status: TaskStatus
    user_request: Optional[str] = None
    agent_name: Optional[str] = None
    process_name: Optional[str] = None
    root_name: Optional[str] = None
    actions: Optional[List[Command]] = None
    messages: Optional[List[str]] = None
    error: Optional[str] = None
    session_id: Optional[str] = None
    task_name: Optional[str] = None
    timestamp: Optional[str] = None
    response_id: Optional[str] = None
    result: Optional[Any] = None


class ClientMessage(BaseModel):
    type: ClientMessageType
    status: TaskStatus
    client_type: ClientType = Field(default=ClientType.DEVICE)
    session_id: Optional[str] = None
    task_name: Optional[str] = None
    client_id: Optional[str] = None
    target_id: Optional[str] = None
    request: Optional[str] = None
    action_results: Optional[List[Result]] = None
    timestamp: Optional[str] = None
    request_id: Optional[str] = None
    prev_response_id: Optional[str] = None
    error: Optional[str] = None
    metadata: Optional[Dict[str, Any]] = None


# Timestamps as UFO writes them: datetime.now(timezone.utc).isoformat().
T0 = "2026-11-21T08:00:00.123456+00:00"
T1 = "2026-11-21T08:00:01.000250+00:00"

# UFO's DeviceSystemInfo as dataclasses.asdict() gives it.
SYSTEM_INFO = {
    "device_id": "kiosk-1",
    "platform": "linux",
    "os_version": "#1 SMP PREEMPT_DYNAMIC Debian 6.1.129-1 (2026-03-09)",
    "cpu_count": 4,
    "memory_total_gb": 7.63,
    "hostname": "kiosk-1",
    "ip_address": "10.20.0.21",
    "supported_features": ["gui", "cli", "browser", "file_system", "office", "linux_apps"],
    "platform_type": "computer",
    "schema_version": "1.0",
    "custom_metadata": {},
}

VECTORS = {
    "client_register": ClientMessage(
        type=ClientMessageType.REGISTER, client_id="kiosk-1", client_type=ClientType.DEVICE,
        status=TaskStatus.OK, timestamp=T0,
        metadata={"system_info": SYSTEM_INFO, "registration_time": T0, "platform": "linux"}),
    "client_heartbeat": ClientMessage(
        type=ClientMessageType.HEARTBEAT, client_id="kiosk-1", status=TaskStatus.OK,
        timestamp=T1, metadata=None),
    "client_command_results": ClientMessage(
        type=ClientMessageType.COMMAND_RESULTS,
        action_results=[
            Result(status=ResultStatus.SUCCESS, namespace="stock", call_id="5f0c2d9e-8a51-4c3b-9d0e-1a2b3c4d5e01",
                   result={"sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "size": 4096}),
            Result(status=ResultStatus.SUCCESS, result=False, call_id="5f0c2d9e-8a51-4c3b-9d0e-1a2b3c4d5e02"),
            Result(status=ResultStatus.SUCCESS, result=0, call_id="5f0c2d9e-8a51-4c3b-9d0e-1a2b3c4d5e03"),
            Result(status=ResultStatus.SUCCESS, result="", call_id="5f0c2d9e-8a51-4c3b-9d0e-1a2b3c4d5e04"),
            Result(status=ResultStatus.SUCCESS, result=[], call_id="5f0c2d9e-8a51-4c3b-9d0e-1a2b3c4d5e05"),
            Result(status=ResultStatus.FAILURE, error="open /etc/shadow: permission denied",
                   namespace="stock", call_id="5f0c2d9e-8a51-4c3b-9d0e-1a2b3c4d5e06"),
            Result(status=ResultStatus.SKIPPED, error="skipped due to previous failure",
                   call_id="5f0c2d9e-8a51-4c3b-9d0e-1a2b3c4d5e07"),
        ],
        session_id="8c1e4f7a-2b3d-4e5f-8a9b-0c1d2e3f4a5b", client_id="kiosk-1",
        prev_response_id="2e7c9a10-5b4d-4c3e-8f2a-9b8c7d6e5f40", status=TaskStatus.CONTINUE,
        timestamp=T1, request_id="0b9a8c7d-6e5f-4a3b-2c1d-0e9f8a7b6c5d"),
    "client_task": ClientMessage(
        type=ClientMessageType.TASK, request="Restart the kiosk page", task_name="restart-kiosk-page",
        session_id="8c1e4f7a-2b3d-4e5f-8a9b-0c1d2e3f4a5b", client_id="kiosk-1", target_id=None,
        client_type=ClientType.DEVICE, status=TaskStatus.CONTINUE, timestamp=T0,
        request_id="3a4b5c6d-7e8f-4a0b-9c1d-2e3f4a5b6c7d", metadata={"platform": "linux"}),
    "client_task_end": ClientMessage(
        type=ClientMessageType.TASK_END, session_id="8c1e4f7a-2b3d-4e5f-8a9b-0c1d2e3f4a5b",
        client_id="kiosk-1", status=TaskStatus.COMPLETED, error=None, timestamp=T1),
    "client_error": ClientMessage(
        type=ClientMessageType.ERROR, status=TaskStatus.ERROR, client_id="kiosk-1", timestamp=T1,
        error="tool crashed: <stderr> said \"disk on fire\" & quit\n"),
    "client_device_info_request": ClientMessage(
        type=ClientMessageType.DEVICE_INFO_REQUEST, client_type=ClientType.CONSTELLATION,
        client_id="constellation-1", target_id="kiosk-1", status=TaskStatus.OK, timestamp=T0,
        request_id="6d5c4b3a-2f1e-4d0c-9b8a-7f6e5d4c3b2a"),
    "client_device_info_response": ClientMessage(
        type=ClientMessageType.DEVICE_INFO_RESPONSE, client_id="kiosk-1", status=TaskStatus.OK,
        prev_response_id="9e8d7c6b-5a4f-4e3d-2c1b-0a9f8e7d6c5b", timestamp=T1,
        metadata={"system_info": SYSTEM_INFO}),
    "server_heartbeat": ServerMessage(
        type=ServerMessageType.HEARTBEAT, status=TaskStatus.OK, timestamp=T0,
        response_id="7a6b5c4d-3e2f-4a1b-8c9d-0e1f2a3b4c5d"),
    "server_command": ServerMessage(
        type=ServerMessageType.COMMAND, status=TaskStatus.CONTINUE,
        actions=[
            Command(tool_name="hash_file", parameters={"path": "/data/kiosk/config.json"},
                    tool_type="data_collection", call_id="5f0c2d9e-8a51-4c3b-9d0e-1a2b3c4d5e01"),
            Command(tool_name="browser_navigate", tool_type="action", call_id="5f0c2d9e-8a51-4c3b-9d0e-1a2b3c4d5e02",
                    parameters={"url": "http://localhost:8080/?a=1&b=<2>", "timeout_ms": 20000, "ratio": 0.75,
                                "offset": -3, "headless": True, "tags": ["kiosk", "lobby"], "extra": None,
                                "label": "Zürich café ✓", "nested": {"depth": {"list": [1, 2.5, "x"]}}}),
            Command(tool_name="list_tools", parameters=None, tool_type="data_collection",
                    call_id="5f0c2d9e-8a51-4c3b-9d0e-1a2b3c4d5e03"),
        ],
        session_id="8c1e4f7a-2b3d-4e5f-8a9b-0c1d2e3f4a5b",
        response_id="2e7c9a10-5b4d-4c3e-8f2a-9b8c7d6e5f40", timestamp=T0),
    "server_task": ServerMessage(
        type=ServerMessageType.TASK, status=TaskStatus.CONTINUE, user_request="Restart the kiosk page",
        task_name="restart-kiosk-page", session_id="8c1e4f7a-2b3d-4e5f-8a9b-0c1d2e3f4a5b",
        response_id="1f2e3d4c-5b6a-4978-8a9b-0c1d2e3f4a5c", agent_name="HostAgent",
        process_name="chromium", root_name="kiosk", messages=["planning", "step 1 of 3"], timestamp=T0),
    "server_task_end": ServerMessage(
        type=ServerMessageType.TASK_END, status=TaskStatus.COMPLETED,
        session_id="8c1e4f7a-2b3d-4e5f-8a9b-0c1d2e3f4a5b", result={"steps": 3, "ok": True},
        error=None, response_id="4c5d6e7f-8a9b-4c0d-9e1f-2a3b4c5d6e7f", timestamp=T1),
    "server_error": ServerMessage(
        type=ServerMessageType.ERROR, status=TaskStatus.ERROR,
        error="field \"status\": unknown value \"sleepy\"", timestamp=T1,
        response_id="5d6e7f8a-9b0c-4d1e-8f2a-3b4c5d6e7f80"),
    "server_device_info_request": ServerMessage(
        type=ServerMessageType.DEVICE_INFO_REQUEST, status=TaskStatus.OK, timestamp=T0,
        response_id="9e8d7c6b-5a4f-4e3d-2c1b-0a9f8e7d6c5b"),
    "server_device_info_response": ServerMessage(
        type=ServerMessageType.DEVICE_INFO_RESPONSE, status=TaskStatus.OK, result=SYSTEM_INFO,
        response_id="6d5c4b3a-2f1e-4d0c-9b8a-7f6e5d4c3b2a", timestamp=T1),
}

# A galaxy client's TASK path, as UFO's code at UFO_COMMIT builds each
# frame. The galaxy client's WebSocketConnectionManager is made with the
# task name of its session (here "task_1"); it names itself
# f"{task_name}@{device_id}", and a TASK for task t1 gets the session_id
# f"{task_name}@{t1}" and the task name f"galaxy/{task_name}/{t1}". Its
# request is prose for UFO's LLM; our server runs plans, so it is a plan.
GALAXY_TASK = "task_1"
GALAXY_CLIENT_ID = f"{GALAXY_TASK}@kiosk-1"
GALAXY_SESSION_ID = f"{GALAXY_TASK}@t1"
GALAXY_PLAN = '{"steps": [{"tool": "echo", "parameters": {"text": "hello"}}]}'

GALAXY = {
    # connection_manager.py, _register_constellation_client
    "client_register": ClientMessage(
        type=ClientMessageType.REGISTER, client_id=GALAXY_CLIENT_ID, client_type=ClientType.CONSTELLATION,
        target_id="kiosk-1", status=TaskStatus.OK, timestamp=T0,
        metadata={"type": "constellation_client", "task_name": GALAXY_TASK, "targeted_device_id": "kiosk-1",
                  "capabilities": ["task_distribution", "session_management", "device_coordination"],
                  "version": "2.0"}),
    # registration.py, send_registration_confirmation: no response_id is
    # passed, so a fresh uuid4 goes out.
    "server_register_ack": ServerMessage(
        type=ServerMessageType.HEARTBEAT, status=TaskStatus.OK, timestamp=T0,
        response_id="0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"),
    # connection_manager.py, send_task_to_device
    "client_task": ClientMessage(
        type=ClientMessageType.TASK, client_type=ClientType.CONSTELLATION, client_id=GALAXY_CLIENT_ID,
        target_id="kiosk-1", task_name=f"galaxy/{GALAXY_TASK}/t1", request=GALAXY_PLAN,
        session_id=GALAXY_SESSION_ID, timestamp=T0, status=TaskStatus.CONTINUE),
    # handler.py, handle_task_request: ctx.task_protocol.send_ack(session_id)
    # (base.py, send_ack), once the task runs.
    "server_task_ack": ServerMessage(
        type=ServerMessageType.HEARTBEAT, status=TaskStatus.OK, session_id=GALAXY_SESSION_ID, timestamp=T0,
        response_id="1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d"),
    # handler.py, send_result: requester_protocol.send_task_end
    # (task_execution.py), when the session ends.
    "server_task_end": ServerMessage(
        type=ServerMessageType.TASK_END, status=TaskStatus.COMPLETED, session_id=GALAXY_SESSION_ID,
        result={"steps": 1}, error=None, response_id="2b3c4d5e-6f7a-4b8c-9d0e-1f2a3b4c5d6e", timestamp=T1),
    "server_task_end_failed": ServerMessage(
        type=ServerMessageType.TASK_END, status=TaskStatus.FAILED, session_id=GALAXY_SESSION_ID,
        result=None, error="device kiosk-1 disconnected", response_id="3c4d5e6f-7a8b-4c9d-8e0f-2a3b4c5d6e7f",
        timestamp=T1),
}

HERE = pathlib.Path(__file__).resolve().parent


def model_for(name):
    return ServerMessage if name.startswith("server_") else ClientMessage


def write():
    if not PYDANTIC_2:
        sys.exit(f"write needs pydantic 2, which UFO's aip package needs; this is pydantic {pydantic.VERSION}")
    for name, msg in VECTORS.items():
        (HERE / f"{name}.ufo.json").write_text(dump_json(msg), encoding="utf-8")
    (HERE / "galaxy").mkdir(exist_ok=True)
    for name, msg in GALAXY.items():
        (HERE / "galaxy" / f"{name}.ufo.json").write_text(dump_json(msg), encoding="utf-8")


def check():
    failed = False
    for name, msg in GALAXY.items():
        if (HERE / "galaxy" / f"{name}.ufo.json").read_text(encoding="utf-8") != dump_json(msg):
            print(f"galaxy/{name}.ufo.json: not what pydantic emits; run: python3 ufo_wire.py write")
            failed = True
    for name, msg in VECTORS.items():
        model = model_for(name)
        ufo = (HERE / f"{name}.ufo.json").read_text(encoding="utf-8")
        if ufo != dump_json(msg):
            print(f"{name}.ufo.json: not what pydantic emits; run: python3 ufo_wire.py write")
            failed = True
        ours = load_json(model, (HERE / f"{name}.json").read_bytes())
        if ours != msg:
            print(f"{name}.json: pydantic reads\n  {ours!r}\nwant\n  {msg!r}")
            failed = True
    return failed


def validate():
    failed = False
    for line in sys.stdin:
        side, _, frame = line.rstrip("\n").partition(" ")
        model = ServerMessage if side == "server" else ClientMessage
        try:
            load_json(model, frame)
        except Exception as e:  # pydantic.ValidationError, or bad JSON
            print(f"{side} frame refused by pydantic: {e}\n  {frame}")
            failed = True
    return failed


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "write":
        write()
    elif cmd in ("check", "validate"):
        sys.exit(1 if (check() if cmd == "check" else validate()) else 0)
    else:
        sys.exit(__doc__)
