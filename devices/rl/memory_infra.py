"""Where a browser's memory goes, as Chromium's own allocators count it (its "memory-infra" dumps).

PSS from /proc says how much each process holds; it cannot say what for. Chromium's allocators keep
their own books (the V8 and Oilpan heaps, PartitionAlloc's malloc, the compositor's tiles and the
pools that keep freed tiles for reuse...), which a memory dump requested over DevTools reports per
process. Sizes are what each allocator has committed, not what is resident: they rank the consumers
and show what changed, while PSS stays the measure of the total.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from devices.rl.cdp import CDPError

MIB = 1 << 20
TRACE_CATEGORIES = ["disabled-by-default-memory-infra", "__metadata"]
TILES = "cc/tile_memory/"  # one dump per tile resource: cc/tile_memory/provider_N/resource_M
DUMP_TIMEOUT_S = 60.0
# cross-process dumps (shared memory by its id) that one process reports for all: not an allocator
SHARED_GLOBALS = "global"


@dataclass
class ProcessMemory:
    """One process's allocators (top-level names: "v8", "blink_gc", "malloc", "cc"...), in bytes."""

    pid: int
    kind: str  # "Browser", "Renderer", "Service: network.mojom.NetworkService"...
    allocators: dict[str, int] = field(default_factory=dict)
    tiles_in_use: int = 0  # tile resources a layer holds
    tiles_free: int = 0  # freed tile resources the compositor's pools keep for reuse
    tile_count_in_use: int = 0
    tile_count_free: int = 0


def _size(attrs: dict[str, Any], name: str) -> int:
    value = attrs.get(name, {}).get("value", 0)
    return int(value, 16) if isinstance(value, str) else int(value)


def parse_dump(events: Iterable[dict[str, Any]]) -> list[ProcessMemory]:
    """The processes of one memory dump's trace events, with their top-level allocators' sizes and
    their tiles split into those in use and those kept free in the pools."""
    events = list(events)
    kinds = {
        e["pid"]: str(e["args"]["name"])
        for e in events
        if e.get("ph") == "M" and e.get("name") == "process_name"
    }
    out: dict[int, ProcessMemory] = {}
    for e in events:
        dumps = e.get("args", {}).get("dumps", {}) if e.get("ph") == "v" else {}
        allocators = dumps.get("allocators")
        if not allocators:
            continue  # a process dumps its totals and its allocators in separate events
        proc = out.setdefault(e["pid"], ProcessMemory(e["pid"], kinds.get(e["pid"], "?")))
        for name, dump in allocators.items():
            attrs = dump.get("attrs", {})
            if name == SHARED_GLOBALS:
                continue
            if "/" not in name:
                proc.allocators[name] = proc.allocators.get(name, 0) + _size(attrs, "size")
            elif name.startswith(TILES) and name.count("/") == 3:
                size = _size(attrs, "size")
                if _size(attrs, "free_size"):
                    proc.tiles_free += size
                    proc.tile_count_free += 1
                else:
                    proc.tiles_in_use += size
                    proc.tile_count_in_use += 1
    return sorted(out.values(), key=lambda p: (p.kind, p.pid))


async def request_dump(endpoint: str, *, timeout_s: float = DUMP_TIMEOUT_S) -> list[dict[str, Any]]:
    """A detailed memory dump of every process of the browser at `endpoint` (its DevTools websocket
    URL), as trace events. Opens its own connection, so a host's pages are not disturbed."""
    from websockets.asyncio.client import connect

    async with connect(endpoint, max_size=None, compression=None, ping_interval=None) as ws:
        ids = iter(range(1, 1 << 30))
        events: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            """The next message; the trace's events, whenever they come, go into `events`."""
            message: dict[str, Any] = json.loads(await ws.recv())
            if message.get("method") == "Tracing.dataCollected":
                events.extend(message["params"]["value"])
            return message

        async def call(method: str, **params: Any) -> dict[str, Any]:
            ident = next(ids)
            await ws.send(json.dumps({"id": ident, "method": method, "params": params}))
            while True:
                message = await receive()
                if message.get("id") == ident:
                    if "error" in message:
                        raise CDPError(f"DevTools: {method}: {message['error'].get('message')}")
                    return dict(message.get("result", {}))

        async def dump() -> list[dict[str, Any]]:
            await call(
                "Tracing.start",
                traceConfig={
                    "includedCategories": TRACE_CATEGORIES,
                    "excludedCategories": ["*"],
                    "memoryDumpConfig": {"triggers": []},  # only the dump asked for below
                },
                transferMode="ReportEvents",
            )
            result = await call("Tracing.requestMemoryDump", levelOfDetail="detailed")
            if not result.get("success"):
                raise CDPError("DevTools: the browser did not take the memory dump")
            await ws.send(json.dumps({"id": next(ids), "method": "Tracing.end"}))
            while (await receive()).get("method") != "Tracing.tracingComplete":
                pass
            return events

        return await asyncio.wait_for(dump(), timeout_s)
