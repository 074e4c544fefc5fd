"""Servers a web page (or any local process) cannot exhaust: half-open requests, trickled bodies,
cross-site session creation.

The verdicts come from the server process itself: its open file descriptors (/proc/PID/fd), its
resident memory (/proc/PID/status) and its session count, and from whether a legitimate request
still gets through. Loopback only; every loop is bounded."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import resource
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HALF_OPEN = 1100
HEADER_TIMEOUT_S = 3.0
BODY_TIMEOUT_S = 3.0
PER_CLIENT = 256
SERVER_NOFILE = 1024  # the common `ulimit -n`

SERVE = textwrap.dedent(
    f"""
    import resource, sys
    resource.setrlimit(resource.RLIMIT_NOFILE, ({SERVER_NOFILE}, {SERVER_NOFILE}))
    from clones.server import serve
    from realbench.http_guard import ServerLimits
    limits = ServerLimits(
        header_timeout_s={HEADER_TIMEOUT_S},
        body_timeout_s={BODY_TIMEOUT_S},
        max_connections_per_client={PER_CLIENT},
    )
    serve("127.0.0.1", 0, log_level="warning", limits=limits,
          announce=lambda url: print(url, flush=True))
    """
)


@dataclass
class Served:
    pid: int
    port: int

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.pid}/fd"))

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise AssertionError("no VmRSS")


@pytest.fixture
def clone_server() -> Iterator[Served]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        served = Served(proc.pid, int(url.rsplit(":", 1)[1]))
        _wait_healthy(served)
        yield served
    finally:
        proc.kill()
        proc.wait(10)


@pytest.fixture(autouse=True)
def enough_fds_for_the_attacker() -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, HALF_OPEN + 512))
    if want < HALF_OPEN + 128:
        pytest.skip(f"this process may open only {hard} files")
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _wait_healthy(served: Served, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if _request(served.port, "GET", "/healthz")[0] == 200:
                return
        time.sleep(0.1)
    raise AssertionError("the server did not come up")


def _request(
    port: int,
    method: str,
    path: str,
    body: dict[str, object] | None = None,
    *,
    source: str = "127.0.0.1",
    headers: dict[str, str] | None = None,
    timeout_s: float = 10.0,
) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout_s, source_address=(source, 0))
    try:
        payload = json.dumps(body).encode() if body is not None else None
        all_headers = {"content-type": "application/json", **(headers or {})}
        conn.request(method, path, body=payload, headers=all_headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def _sessions(served: Served, source: str = "127.0.0.2") -> int:
    status, data = _request(served.port, "GET", "/healthz", source=source)
    assert status == 200
    return int(json.loads(data)["sessions"])


def _half_open(port: int, n: int, source: str = "127.0.0.1") -> list[socket.socket]:
    """`n` connections that each send the start of a request's headers and never finish them."""
    out = []
    for _ in range(n):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.settimeout(2.0)
        sock.bind((source, 0))
        try:
            sock.connect(("127.0.0.1", port))
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        except OSError:
            sock.close()  # refused or reset at once: the cap did its job
            continue
        out.append(sock)
    return out


def _closed_by_server(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def test_half_open_requests_cannot_exhaust_the_clone_server(clone_server):
    base_fds = clone_server.fds()
    base_rss = clone_server.rss_mb()
    base_sessions = _sessions(clone_server)
    t0 = time.monotonic()
    attackers = _half_open(clone_server.port, HALF_OPEN)
    try:
        # one client holds at most PER_CLIENT connections, far under the server's 1024 files (the
        # ones over the cap are closed within a turn or two of its event loop)
        settle = time.monotonic() + 3
        while time.monotonic() < settle and clone_server.fds() > base_fds + PER_CLIENT + 16:
            time.sleep(0.1)
        assert clone_server.fds() <= base_fds + PER_CLIENT + 16, (base_fds, clone_server.fds())
        # another client is served at once, during the flood
        status, data = _request(
            clone_server.port, "POST", "/api/sessions", {"clone": "toy_shop"}, source="127.0.0.2"
        )
        assert status == 200, data
        assert time.monotonic() - t0 < HEADER_TIMEOUT_S + 20
        # the half-open ones are dropped once the header deadline passes
        deadline = time.monotonic() + HEADER_TIMEOUT_S + 10
        while time.monotonic() < deadline and clone_server.fds() > base_fds + 8:
            time.sleep(0.25)
        assert clone_server.fds() <= base_fds + 8, (base_fds, clone_server.fds())
        assert all(_closed_by_server(s) for s in attackers[:50])
        # and the attacker's own address is served again
        assert _request(clone_server.port, "GET", "/healthz")[0] == 200
        assert _sessions(clone_server) == base_sessions + 1
        assert clone_server.rss_mb() - base_rss < 60, (base_rss, clone_server.rss_mb())
    finally:
        for s in attackers:
            s.close()


def test_a_connection_that_sends_nothing_is_dropped(clone_server):
    sock = socket.create_connection(("127.0.0.1", clone_server.port), timeout=HEADER_TIMEOUT_S + 10)
    try:
        t0 = time.monotonic()
        assert sock.recv(1) == b""  # the server closed it
        assert time.monotonic() - t0 < HEADER_TIMEOUT_S + 5
    except ConnectionResetError:
        assert time.monotonic() - t0 < HEADER_TIMEOUT_S + 5
    finally:
        sock.close()


def test_a_trickled_body_is_answered_408_and_creates_nothing(clone_server):
    before = _sessions(clone_server)
    sock = socket.create_connection(("127.0.0.1", clone_server.port), timeout=BODY_TIMEOUT_S + 10)
    try:
        body = json.dumps({"clone": "toy_shop"}).encode()
        head = (
            "POST /api/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body) + 100}\r\n\r\n"
        )
        sock.sendall(head.encode() + body[:5])
        t0 = time.monotonic()
        answer = sock.recv(4096)
        assert answer.startswith(b"HTTP/1.1 408"), answer[:100]
        assert time.monotonic() - t0 < BODY_TIMEOUT_S + 5
    finally:
        sock.close()
    assert _sessions(clone_server) == before


def test_cross_site_session_creation_is_refused_and_gets_make_none(clone_server):
    before = _sessions(clone_server)
    conn = http.client.HTTPConnection("127.0.0.1", clone_server.port, timeout=10)
    try:
        for _ in range(200):  # what <img src="http://127.0.0.1:PORT/new/toy_shop"> tags would send
            conn.request("GET", "/new/toy_shop", headers={"Referer": "http://evil.example/"})
            resp = conn.getresponse()
            resp.read()
            assert resp.status == 405
        # a cross-site form POST carries the other site's Origin: refused
        conn.request("POST", "/new/toy_shop", headers={"Origin": "http://evil.example"})
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 403
    finally:
        conn.close()
    assert _sessions(clone_server) == before
    # the index page's own button (same origin) does create one
    status, _ = _request(
        clone_server.port,
        "POST",
        "/new/toy_shop",
        headers={"Origin": f"http://127.0.0.1:{clone_server.port}"},
    )
    assert status == 303
    assert _sessions(clone_server) == before + 1


def test_the_rollout_service_drops_half_open_requests_too():
    from devices.rl.pool import EnvPool
    from devices.rl.service import RolloutServer
    from realbench.http_guard import ServerLimits

    limits = ServerLimits(header_timeout_s=HEADER_TIMEOUT_S, max_connections_per_client=64)
    pool = EnvPool(backend="inline", workers=1)
    try:
        with RolloutServer(pool, limits=limits) as server:
            me = Served(os.getpid(), server.port)
            base = me.fds()
            attackers = _half_open(server.port, 300)
            try:
                # the per-client cap holds (our own fds count the attackers' ends too)
                settle = time.monotonic() + 3
                while time.monotonic() < settle and me.fds() - base > len(attackers) + 64 + 16:
                    time.sleep(0.1)
                assert me.fds() - base <= len(attackers) + 64 + 16
                deadline = time.monotonic() + HEADER_TIMEOUT_S + 10
                while time.monotonic() < deadline and not all(_closed_by_server(s) for s in attackers):
                    time.sleep(0.25)
                assert all(_closed_by_server(s) for s in attackers)
                status, _ = _request(server.port, "GET", "/v1/health")
                assert status == 200
            finally:
                for s in attackers:
                    s.close()
    finally:
        pool.close()
