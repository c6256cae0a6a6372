#!/usr/bin/env python3
"""Drives UFO's own galaxy (constellation) client against a server.

Run with UFO's aip and galaxy packages on PYTHONPATH (a copy of a
microsoft/UFO checkout) and pydantic 2:

  python3 ufo_galaxy_client.py WS_URL_WITH_TOKEN DEVICE_ID PLAN

It connects and registers as UFO's galaxy client does (one
WebSocketConnectionManager and MessageProcessor, task name "task_1"), asks
for the device's info, sends two TASKs with UFO's send_task_to_device: t1
with PLAN as its request, t2 with prose, which a server that runs plans
cannot start, and prints what came back, as JSON, on stdout.

Only UFO's client code runs. Two modules it imports for nothing this path
uses are stood in for when absent, as the image lacks UFO's dependencies:
fastapi (for aip's server endpoint) and ufo.client.mcp (for a type hint in
aip.messages). The galaxy package's __init__, which pulls in its LLM
agents, is bypassed: its subpackages are loaded from their folders.
"""

import asyncio
import importlib.util
import json
import pathlib
import sys
import time
import types


def stand_in(name, **attrs):
    """Registers module name, with attrs, unless it can be imported."""
    try:
        if importlib.util.find_spec(name) is not None:
            return
    except ModuleNotFoundError:
        pass
    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        sub = ".".join(parts[:i])
        if sub not in sys.modules:
            sys.modules[sub] = types.ModuleType(sub)
            sys.modules[sub].__path__ = []
    for k, v in attrs.items():
        setattr(sys.modules[name], k, v)


def bare_package(name, root):
    """Registers package name from its folder without running its __init__."""
    mod = types.ModuleType(name)
    mod.__path__ = [str(root / name.replace(".", "/"))]
    sys.modules[name] = mod


def load_ufo():
    root = next(pathlib.Path(p) for p in sys.path if (pathlib.Path(p or ".") / "galaxy").is_dir())
    stand_in("fastapi", WebSocket=type("WebSocket", (), {}))
    stand_in("ufo.client.mcp.mcp_server_manager", BaseMCPServer=type("BaseMCPServer", (), {}))
    for pkg in ("galaxy", "galaxy.core", "galaxy.client", "galaxy.client.components"):
        bare_package(pkg, root)


async def run(url, device_id, plan):
    from galaxy.client.components.connection_manager import WebSocketConnectionManager
    from galaxy.client.components.device_registry import DeviceRegistry
    from galaxy.client.components.heartbeat_manager import HeartbeatManager
    from galaxy.client.components.message_processor import MessageProcessor
    from galaxy.client.components.types import AgentProfile, TaskRequest

    registry = DeviceRegistry()
    manager = WebSocketConnectionManager("task_1")
    processor = MessageProcessor(registry, HeartbeatManager(manager, registry), manager)
    await manager.connect_to_device(AgentProfile(device_id=device_id, server_url=url), processor)
    out = {"registered": True, "device_info": await manager.request_device_info(device_id)}

    for task_id, request, timeout in (("t1", plan, 60.0), ("t2", "Open the kiosk page", 20.0)):
        start = time.monotonic()
        try:
            res = await manager.send_task_to_device(
                device_id, TaskRequest(task_id=task_id, device_id=device_id, request=request,
                                       task_name=task_id, timeout=timeout))
            out[task_id] = {"status": getattr(res.status, "value", res.status), "error": res.error,
                            "result": res.result, "seconds": time.monotonic() - start}
        except asyncio.TimeoutError:
            out[task_id] = {"status": "timed out", "seconds": time.monotonic() - start}
    await manager.disconnect_all()
    processor.stop_all_handlers()
    return out


if __name__ == "__main__":
    load_ufo()
    print(json.dumps(asyncio.run(run(*sys.argv[1:4])), default=str))
