"""A JSON-RPC call to a phone opens one adb stream, without asking the adb server its version
first (adbutils asks before every stream it opens by serial: one more connection to the server and
a 10 ms pause closing it). Counted on the wire, by a proxy in front of the real adb server that
reads the request each connection opens with."""

from __future__ import annotations

import shutil
import socket
import socketserver
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import adbutils
import pytest

from devices.phone import PhoneDevice
from devices.virtual import VirtualPhoneHost

pytestmark = [pytest.mark.farm, pytest.mark.skipif(shutil.which("adb") is None, reason="needs Debian's adb")]


class AdbRequestCounter(socketserver.ThreadingTCPServer):
    """Forwards every connection to the adb server on `upstream`, counting the first request of
    each (`host:version`, `host:tport:serial:…`); the rest of the stream is piped unread."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.requests: Counter[str] = Counter()
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Forward)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def count(self, prefix: str) -> int:
        with self.lock:
            return sum(n for request, n in self.requests.items() if request.startswith(prefix))


class _Forward(socketserver.BaseRequestHandler):
    server: AdbRequestCounter

    def handle(self) -> None:
        client: socket.socket = self.request
        head = _read_exactly(client, 4)
        body = _read_exactly(client, int(head, 16)) if head else b""
        with self.server.lock:
            self.server.requests[body.decode("utf-8", "replace")] += 1
        with socket.create_connection(("127.0.0.1", self.server.upstream)) as upstream:
            upstream.sendall(head + body)
            back = threading.Thread(target=_pipe, args=(upstream, client), daemon=True)
            back.start()
            _pipe(client, upstream)
            back.join(timeout=10)


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while chunk := src.recv(65536):
            dst.sendall(chunk)
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


@pytest.fixture(scope="module")
def phone_serial(adb_server_port: int) -> Iterator[str]:
    with VirtualPhoneHost() as host:
        (info,) = host.start(1, screens="static")
        host.adb_connect(adb_server_port)
        yield info.serial


@pytest.fixture
def counter(adb_server_port: int, monkeypatch: pytest.MonkeyPatch) -> Iterator[AdbRequestCounter]:
    proxy = AdbRequestCounter(adb_server_port)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setattr(adbutils, "adb", adbutils.AdbClient(port=proxy.port))
    try:
        yield proxy
    finally:
        proxy.shutdown()
        proxy.server_close()


def test_a_call_opens_one_stream_and_asks_no_version(phone_serial: str, counter: Any) -> None:
    device = PhoneDevice(phone_serial, virtual=True)
    try:
        device.connect()
        versions_before = counter.count("host:version")
        streams_before = counter.count(f"host:tport:serial:{phone_serial}")
        for _ in range(8):
            assert "<hierarchy" in device.hierarchy()
        streams = counter.count(f"host:tport:serial:{phone_serial}") - streams_before
        assert streams == 8, counter.requests
        assert counter.count("host:version") - versions_before == 0, counter.requests
    finally:
        device.close()


def test_a_forgotten_version_is_asked_once_again(phone_serial: str, counter: Any) -> None:
    """What a failed stream does (the server may have been restarted): the next call asks again,
    and only that one."""
    from devices.phone import _KnownVersionClient

    device = PhoneDevice(phone_serial, virtual=True)
    try:
        device.connect()
        _KnownVersionClient.forget("127.0.0.1", counter.port)
        before = counter.count("host:version")
        for _ in range(3):
            device.hierarchy()
        assert counter.count("host:version") - before == 1, counter.requests
    finally:
        device.close()


def test_the_stream_sends_without_waiting_for_acks(phone_serial: str) -> None:
    """http.client writes a request's headers and body in two sends; with Nagle's algorithm the
    body waits for the adb server's delayed ACK of the headers (40 ms on every call). The kernel's
    own socket option says whether it can."""
    import socket

    from devices.phone import _TimedConnection

    device = PhoneDevice(phone_serial, virtual=True)
    try:
        device.connect()
        u2_device = device._u2
        assert u2_device is not None
        conn = _TimedConnection(u2_device.adb_device, u2_device._device_server_port, 10.0)
        conn.connect()
        try:
            assert conn.sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
        finally:
            conn.close()
    finally:
        device.close()
