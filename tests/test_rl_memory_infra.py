"""Chromium's own memory books, as `devices.rl.memory_infra` reads them: a dump of a live host's
browser, and the parsing of a dump's trace events."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from devices.rl import cdp
from devices.rl.config import EnvConfig
from devices.rl.host import ResetRequest, StepRequest
from devices.rl.memory_infra import parse_dump, request_dump


def _size(n: int) -> dict[str, Any]:
    return {"size": {"type": "scalar", "units": "bytes", "value": hex(n)[2:]}}


def _tile(n: int, free: bool) -> dict[str, Any]:
    return {
        "attrs": {
            **_size(n),
            "free_size": {"type": "scalar", "units": "bytes", "value": hex(n if free else 0)[2:]},
        }
    }


# Written by hand in the shape Chromium's trace events take: not a recorded dump.
HAND_WRITTEN = [
    {"ph": "M", "name": "process_name", "pid": 7, "args": {"name": "Renderer"}},
    {"ph": "M", "name": "process_name", "pid": 3, "args": {"name": "Browser"}},
    {"ph": "v", "pid": 7, "args": {"dumps": {"process_totals": {"resident_set_bytes": "100"}}}},
    {
        "ph": "v",
        "pid": 7,
        "args": {
            "dumps": {
                "allocators": {
                    "v8": {"attrs": _size(3 << 20)},
                    "v8/main/heap/new_space": {"attrs": _size(2 << 20)},
                    "cc": {"attrs": _size(4 << 18)},
                    "cc/tile_memory": {"attrs": _size(4 << 18)},
                    "cc/tile_memory/provider_1": {"attrs": _size(4 << 18)},
                    "cc/tile_memory/provider_1/resource_1": _tile(1 << 18, free=False),
                    "cc/tile_memory/provider_1/resource_2": _tile(1 << 18, free=True),
                    "cc/tile_memory/provider_1/resource_3": _tile(1 << 18, free=True),
                    "cc/tile_memory/provider_1/resource_4": _tile(1 << 18, free=False),
                }
            }
        },
    },
    {
        "ph": "v",
        "pid": 3,
        "args": {
            "dumps": {"allocators": {"malloc": {"attrs": _size(5 << 20)}, "global": {"attrs": _size(9)}}}
        },
    },
]


def test_a_dump_is_read_per_process_with_its_tiles_split_in_use_and_free():
    browser, renderer = parse_dump(HAND_WRITTEN)
    assert (browser.kind, browser.allocators) == ("Browser", {"malloc": 5 << 20})
    assert renderer.kind == "Renderer"
    assert renderer.allocators == {"v8": 3 << 20, "cc": 1 << 20}  # top level only: no double count
    assert (renderer.tiles_in_use, renderer.tile_count_in_use) == (2 << 18, 2)
    assert (renderer.tiles_free, renderer.tile_count_free) == (2 << 18, 2)
    assert renderer.tiles_in_use + renderer.tiles_free == renderer.allocators["cc"]


def test_an_event_without_allocators_makes_no_process():
    totals_only = [e for e in HAND_WRITTEN if "allocators" not in e["args"].get("dumps", {})]
    assert len(totals_only) == 3 and parse_dump(totals_only) == []


@pytest.mark.browser
def test_a_live_hosts_browser_reports_its_renderers_heaps_and_tiles(env_host, rl_pack):
    config = EnvConfig(pack=rl_pack, task_id="buy-item", image="jpeg")
    ids = env_host.create([config] * 2)
    env_host.reset([ResetRequest(i, seed=i) for i in ids])
    click = json.dumps({"type": "click", "x": 500, "y": 500})
    env_host.step([StepRequest(i, click) for i in ids])
    browser = env_host.env(ids[0])._browser
    assert browser is not None
    [endpoint] = cdp.devtools_endpoints(None, cdp.pool_mark(browser.pool))
    processes = parse_dump(asyncio.run(request_dump(endpoint)))
    kinds = {p.kind for p in processes}
    assert {"Browser", "Renderer"} <= kinds
    renderers = [p for p in processes if p.kind == "Renderer"]
    assert all(p.allocators.get("v8", 0) > 1 << 20 for p in renderers)  # each renderer runs V8
    assert sum(p.tiles_in_use for p in renderers) >= 2 * 256 * 256 * 4  # two pages on screen
    assert all(p.tiles_in_use + p.tiles_free <= p.allocators.get("cc", 0) for p in renderers)
