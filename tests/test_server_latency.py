"""The in-process HTTP servers answer without Nagle's delay: with it, every request waited for
the client's delayed ACK (about 40 ms), which alone put a clone reset near its 50 ms budget.
The minimum of several requests is what the delay sets a floor under, whatever the load."""

from __future__ import annotations

import time

import httpx

from clones.server import CloneServer
from realbench.agents.fake_server import FakeModelServer

NAGLE_FLOOR_MS = 35.0


def fastest_ms(client: httpx.Client, method: str, path: str, **kwargs: object) -> float:
    times = []
    for _ in range(12):
        started = time.perf_counter()
        client.request(method, path, **kwargs)  # type: ignore[arg-type]
        times.append((time.perf_counter() - started) * 1000)
    return min(times)


def test_clone_server_replies_without_the_delayed_ack_wait():
    with CloneServer() as server, httpx.Client(base_url=server.url) as client:
        assert fastest_ms(client, "GET", "/api/clones") < NAGLE_FLOOR_MS
        # a body-carrying request too (two writes on the client side)
        assert fastest_ms(client, "POST", "/api/sessions", json={"clone": "nope"}) < NAGLE_FLOOR_MS


def test_fake_model_server_replies_without_the_delayed_ack_wait():
    with FakeModelServer(script=[], repeat_last=True) as server, httpx.Client() as client:
        assert fastest_ms(client, "GET", f"http://127.0.0.1:{server.port}/health") < NAGLE_FLOOR_MS
