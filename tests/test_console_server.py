"""The console's server a web page cannot exhaust or misuse (no phone needed): the body limit,
deep JSON, the token on POSTs, Origin by host and port, files outside the store, labels under the
store's writer lock, and clone/phone pairing across stores. Verdicts come from the server's
process (its memory), the store on disk and the pages' bytes."""

from __future__ import annotations

import base64
import contextlib
import json
import select
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from realbench.console.command import console_app
from realbench.console.server import serve_in_thread
from realbench.store import RunStore
from realbench.store_lock import StoreLock
from tests.analysis_fixtures import write_store

EPISODE = "synthetic:trained@real/task1/s0/r0/a0"
CLONE_EPISODE = "synthetic:trained@clone/task1/s0/r0/a0"
MB = 1024 * 1024


@contextlib.contextmanager
def _console(tmp: Path, stores: list[Path], **kw: object) -> Iterator[str]:
    with (
        console_app(rig=None, stores=stores, data_dir=tmp / "data", **kw) as app,
        serve_in_thread(app) as url,
    ):  # type: ignore[arg-type]
        yield url


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("console-server")
    # clone and phone runs in separate stores, as the demo and the README lay them out
    return write_store(tmp / "clone", env="clone", n_tasks=2, repeats=1), write_store(
        tmp / "real", env="real", n_tasks=2, repeats=1
    )


@pytest.fixture(scope="module")
def url(stores: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with _console(tmp_path_factory.mktemp("data"), list(stores)) as u:
        yield u


def _label(url: str, **extra: object) -> httpx.Response:
    body = {"store": "1", "episode": EPISODE, "labeller": "ann", "success": True, **extra}
    return httpx.post(url + "/api/label", json=body, timeout=60)


def _raw_post(url: str, path: str, headers: dict[str, str], chunks: Iterator[bytes]) -> tuple[str, int]:
    """Send a POST over a plain socket; (the status line, body bytes sent before the answer came)."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    head = f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\n" + "".join(
        f"{k}: {v}\r\n" for k, v in headers.items()
    )
    sock.sendall(head.encode() + b"\r\n")
    sent = 0
    try:
        for chunk in chunks:
            if select.select([sock], [], [], 0)[0]:
                break  # the server has answered: stop sending
            sock.sendall(chunk)
            sent += len(chunk)
    except (BrokenPipeError, ConnectionResetError, TimeoutError):
        pass
    try:
        status = sock.recv(4096).decode("latin-1").split("\r\n", 1)[0]
    except (ConnectionResetError, TimeoutError):
        status = ""
    sock.close()
    return status, sent


def _chunked(total: int, size: int = MB) -> Iterator[bytes]:
    piece = b"x" * size
    for _ in range(total // size):
        yield f"{size:x}\r\n".encode() + piece + b"\r\n"
    yield b"0\r\n\r\n"


def test_a_300_mb_post_is_refused_early_and_memory_does_not_grow(url: str) -> None:
    me = psutil.Process()
    rss = me.memory_info().rss
    # a declared length over the limit: refused before a byte of the body is read
    status, _ = _raw_post(
        url,
        "/api/label",
        {"Content-Type": "application/json", "Content-Length": str(300 * MB)},
        iter([b"{" * MB]),
    )
    assert status.startswith("HTTP/1.1 413"), status
    # a streamed body without a length: cut off once past the limit
    status, sent = _raw_post(
        url,
        "/api/label",
        {"Content-Type": "application/json", "Transfer-Encoding": "chunked"},
        _chunked(300 * MB),
    )
    assert status.startswith("HTTP/1.1 413"), status
    assert sent < 32 * MB, sent / MB  # answered after about the limit, not at the end
    grown = (me.memory_info().rss - rss) / MB
    assert grown < 100, f"the console's memory grew by {grown:.0f} MB"  # unguarded: +560 MB


def test_deep_json_is_a_400_not_a_500(url: str) -> None:
    for body in ("[" * 50_000 + "]" * 50_000, '{"a":' * 5_000 + "1" + "}" * 5_000):
        r = httpx.post(
            url + "/api/label", content=body, headers={"Content-Type": "application/json"}, timeout=60
        )
        assert r.status_code == 400, (r.status_code, r.text[:200])
        assert "deeper" in r.json()["error"]
    r = httpx.post(
        url + "/api/label", content=b"{not json", headers={"Content-Type": "application/json"}, timeout=60
    )
    assert r.status_code == 400


def test_origin_is_checked_by_host_and_port(url: str) -> None:
    port = int(url.rsplit(":", 1)[1])
    for origin in (f"http://127.0.0.1:{port + 1}", "http://127.0.0.1", f"https://127.0.0.1:{port}", "null"):
        r = httpx.post(url + "/api/label", json={}, headers={"Origin": origin}, timeout=30)
        assert r.status_code == 403, origin
        assert (
            httpx.get(
                url + "/api/label/agreement?store=0", headers={"Origin": origin}, timeout=30
            ).status_code
            == 403
        )
    same = httpx.post(url + "/api/label", json={}, headers={"Origin": f"http://127.0.0.1:{port}"}, timeout=30)
    assert same.status_code == 400  # past the guard: the app's own answer (no labeller)


def test_a_token_in_the_query_is_never_accepted_on_a_post(stores: tuple[Path, Path], tmp_path: Path) -> None:
    token = "q" * 32
    with _console(tmp_path, list(stores), token=token, loopback=False) as u:
        body = {"store": "1", "episode": EPISODE, "labeller": "tok", "success": True}
        r = httpx.post(f"{u}/api/label?token={token}", json=body, timeout=30)
        assert r.status_code == 401
        with RunStore(stores[1], create=False) as store:
            assert not [v for v in store.verdicts(EPISODE) if v.name == "tok"]
        ok = httpx.post(u + "/api/label", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=30)
        assert ok.status_code == 200
        # a link a person opens still works: the GET moves the token into a cookie
        assert httpx.get(f"{u}/runs?token={token}", timeout=30).status_code == 303


def test_labels_wait_for_the_store_writer_lock(url: str, stores: tuple[Path, Path]) -> None:
    real = stores[1]
    held = StoreLock(real, "realbench run --out real")
    try:
        r = _label(url, labeller="locked-out")
        assert r.status_code == 423, r.text
        assert "realbench run --out real" in r.json()["error"]  # names the holder
    finally:
        held.release()
    with RunStore(real, create=False) as store:
        assert not [v for v in store.verdicts(EPISODE) if v.name == "locked-out"]  # nothing written
    assert _label(url, labeller="after").status_code == 200
    with RunStore(real, create=False) as store:
        assert [v for v in store.verdicts(EPISODE) if v.name == "after"]


def test_the_episode_page_pairs_clone_and_phone_across_stores(url: str) -> None:
    page = httpx.get(url + "/runs/1/episode", params={"id": EPISODE}, timeout=60).text
    sides = page.split('class="side"')
    assert len(sides) == 3
    assert CLONE_EPISODE in sides[1] and "No episode of this task" not in sides[1]
    assert EPISODE in sides[2]
    # and from the clone store's side
    page = httpx.get(url + "/runs/0/episode", params={"id": CLONE_EPISODE}, timeout=60).text
    assert EPISODE in page.split('class="side"')[2]


def test_files_outside_the_store_are_never_embedded(tmp_path: Path) -> None:
    store_dir = write_store(tmp_path / "s", env="real", n_tasks=1, repeats=1)
    secret_png = tmp_path / "outside.png"
    from PIL import Image

    Image.new("RGB", (40, 80), (1, 2, 3)).save(secret_png)
    secret_video = tmp_path / "outside.mp4"
    secret_video.write_bytes(b"SECRET-VIDEO-BYTES" * 10)
    episode = "synthetic:trained@real/task0/s0/r0/a0"
    with RunStore(store_dir, create=False) as store:
        folder = store.episode_dir(episode)
    steps_file = folder / "steps.jsonl"
    steps = [json.loads(line) for line in steps_file.read_text(encoding="utf-8").splitlines()]
    depth = len(folder.relative_to(tmp_path).parts)
    steps[0]["screenshot"] = "../" * depth + "outside.png"
    steps[1]["screenshot"] = str(secret_png)
    steps_file.write_text("".join(json.dumps(s) + "\n" for s in steps), encoding="utf-8")
    (folder / "video.mp4").symlink_to(secret_video)
    linked_final = folder / "final.png"
    linked_final.unlink(missing_ok=True)
    linked_final.symlink_to(secret_png)
    with _console(tmp_path, [store_dir]) as u:
        page = httpx.get(u + "/runs/0/episode", params={"id": episode}, timeout=60).text
    assert base64.b64encode(secret_video.read_bytes()).decode()[:40] not in page
    assert "data:video" not in page and "outside.mp4" not in page
    # the two doctored steps show no image; the untouched third one still does
    side = page.split('class="side"')[2]
    assert side.count("data:image/jpeg") == 1, side.count("data:image/jpeg")
    assert "final screen" not in side


def test_big_declared_length_is_refused_without_waiting_for_the_body(url: str) -> None:
    started = time.monotonic()
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            f"POST /api/label HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {300 * MB}\r\n\r\n".encode()
        )
        assert sock.recv(4096).startswith(b"HTTP/1.1 413")
    assert time.monotonic() - started < 10
