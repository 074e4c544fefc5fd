"""Abuse of the clone server and the rollout service: origins, hosts, bodies, nesting, session
floods, hostile state. Evidence: the servers' own session stores and what a later render returns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from starlette.testclient import TestClient

from clones.drift import relabel_html
from clones.server import CloneServer
from devices.rl.service import RolloutService
from devices.rl.service import create_app as rollout_app
from realbench.errors import ServerError
from realbench.http_guard import LOOPBACK_NAMES, ServerLimits, ServerSecurity, security_for

ROOT = Path(__file__).resolve().parent.parent
DEEP = b"[" * 100_000 + b"]" * 100_000


def _cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    full.pop("REALBENCH_SERVER_TOKEN", None) if env is None else None
    return subprocess.run(
        [sys.executable, "-m", "realbench", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full,
    )


def test_non_loopback_needs_a_token(monkeypatch):
    monkeypatch.delenv("REALBENCH_SERVER_TOKEN", raising=False)
    with pytest.raises(ServerError, match="without a token"):
        security_for("0.0.0.0")
    assert security_for("127.0.0.1").token is None
    monkeypatch.setenv("REALBENCH_SERVER_TOKEN", "t0ken")
    assert security_for("0.0.0.0").token == "t0ken"


@pytest.mark.parametrize(
    "args, says",
    [
        (["serve", "--host", "0.0.0.0", "--port", "0"], "without a token"),
        (["rollout-service", "--host", "0.0.0.0", "--port", "0"], "without a token"),
        (["serve", "--port", "99999"], "not a port number"),
    ],
)
def test_cli_refusals_are_one_line(args, says):
    done = _cli(*args)
    assert done.returncode != 0
    assert says in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.fixture
def server():
    # room for a whole train state (≈ 90 KB with the real timetable) to come back through PUT
    limits = ServerLimits(max_body_bytes=512 * 1024, max_sessions=5, idle_timeout_s=3600)
    with CloneServer(limits=limits) as s:
        yield s


def _create(client: httpx.Client, **extra) -> httpx.Response:
    return client.post("/api/sessions", json={"clone": "train_ticketing", **extra})


def test_hosts_origins_and_content_types(server):
    with httpx.Client(base_url=server.url) as c:
        assert c.get("/healthz").status_code == 200
        assert c.get("/healthz", headers={"host": "evil.example"}).status_code == 403
        assert _create(c, setup=None).status_code == 200
        cross = c.post(
            "/api/sessions", json={"clone": "train_ticketing"}, headers={"origin": "http://evil.example"}
        )
        assert cross.status_code == 403
        # Another local web app (same host, another port) is another origin.
        host, port = server.url.rsplit(":", 1)
        other_port = c.post(
            "/api/sessions", json={"clone": "train_ticketing"}, headers={"origin": f"{host}:{int(port) + 1}"}
        )
        assert other_port.status_code == 403
        plain = c.post(
            "/api/sessions",
            content=json.dumps({"clone": "train_ticketing"}),
            headers={"content-type": "text/plain"},
        )
        assert plain.status_code == 415
        same = c.post("/api/sessions", json={"clone": "train_ticketing"}, headers={"origin": server.url})
        assert same.status_code == 200
    assert len(server.store) == 2, "only the two allowed creates made sessions"


def test_body_cap_session_cap_and_idle_expiry():
    limits = ServerLimits(max_body_bytes=64 * 1024, max_sessions=3, idle_timeout_s=0.5)
    with CloneServer(limits=limits) as server, httpx.Client(base_url=server.url) as c:
        big = c.post("/api/sessions", json={"clone": "train_ticketing", "params": {"x": "a" * 200_000}})
        assert big.status_code == 413 and len(server.store) == 0

        def chunks():
            for _ in range(100):
                yield b" " * 4096

        streamed = c.post("/api/sessions", content=chunks(), headers={"content-type": "application/json"})
        assert streamed.status_code == 413
        ids = [_create(c).json()["session"] for _ in range(3)]
        flood = _create(c)
        assert flood.status_code == 429 and "session limit" in flood.json()["error"]
        assert len(server.store) == 3
        time.sleep(0.7)
        assert _create(c).status_code == 200, "idle sessions expired and made room"
        assert c.get(f"/api/sessions/{ids[0]}/state").status_code == 404
        assert len(server.store) == 1


def test_deep_json_is_a_400_and_the_server_stays_up(server):
    with httpx.Client(base_url=server.url) as c:
        sid = _create(c).json()["session"]
        for method, path in (("POST", "/api/sessions"), ("PUT", f"/api/sessions/{sid}/state")):
            resp = c.request(
                method,
                path,
                content=DEEP[:60_000] + DEEP[-60_000:],
                headers={"content-type": "application/json"},
            )
            assert resp.status_code in (400, 413), resp.text
        deep = c.post(
            "/api/sessions", content=b"[" * 5000 + b"]" * 5000, headers={"content-type": "application/json"}
        )
        assert deep.status_code == 400 and "deeper" in deep.json()["error"]
        nested: dict = {}
        cur = nested
        for _ in range(200):
            cur["a"] = {}
            cur = cur["a"]
        moderate = c.post("/api/sessions", json={"clone": "train_ticketing", "params": nested})
        assert moderate.status_code == 400
        assert c.get(f"/s/{sid}/screen").status_code == 200


def test_put_state_with_an_arbitrary_route_never_breaks_later_renders(server):
    from clones.train_ticketing import views

    with httpx.Client(base_url=server.url) as c:
        sid = _create(c).json()["session"]
        state = c.get(f"/api/sessions/{sid}/state").json()
        for route in ("../../etc/passwd", "no_such_screen", "home.html\x00"):
            bad = json.loads(json.dumps(state))
            bad["ui"]["route"] = route
            resp = c.put(f"/api/sessions/{sid}/state", json=bad)
            assert resp.status_code == 400 and "not a route" in resp.json()["error"]
            assert c.get(f"/s/{sid}").status_code == 200
            assert c.get(f"/s/{sid}/screen").status_code == 200
    # the clone itself falls back instead of using the route as a template name
    state["ui"]["route"] = "../../etc/passwd"
    assert "<" in views.render(state)


def test_relabel_text_cannot_inject_attributes():
    markup = '<input placeholder="出发地" aria-label="出发地"><span>出发地</span>'
    evil = 'x" onfocus="alert(1)'
    out = relabel_html(markup, {"出发地": evil})
    from html.parser import HTMLParser

    seen: list[list[tuple[str, str | None]]] = []

    class Attrs(HTMLParser):
        def handle_starttag(self, tag, attrs):
            seen.append(attrs)

    Attrs().feed(out)
    assert seen[0] == [("placeholder", evil), ("aria-label", evil)], "the label stays one attribute value"


def test_token_header_cookie_and_query():
    security = ServerSecurity(token="s3cret-token", allowed_hosts=LOOPBACK_NAMES)
    with CloneServer(security=security) as server, httpx.Client(base_url=server.url) as c:
        assert c.get("/healthz").status_code == 401
        assert c.get("/healthz", headers={"authorization": "Bearer wrong"}).status_code == 401
        assert c.get("/healthz", headers={"authorization": "Bearer s3cret-token"}).status_code == 200
        assert (
            c.post("/api/sessions?token=s3cret-token", json={"clone": "train_ticketing"}).status_code == 401
        )
        page = c.get("/?token=s3cret-token")
        assert page.status_code == 200 and "rb_token=s3cret-token" in page.headers["set-cookie"]
        assert c.post("/api/sessions", json={"clone": "train_ticketing"}).status_code == 200  # the cookie


class _NoPool:
    """Stands in for the worker pool: these requests must be refused before any worker is asked."""

    replaced = 0

    def create(self, configs):
        return list(range(len(configs)))

    def close_envs(self, keys):
        return list(keys)

    def stats(self):
        return []


def test_rollout_service_refuses_unregistered_packs_deep_json_and_floods(tmp_path):
    pool = _NoPool()
    service = RolloutService(pool, limits=ServerLimits(max_sessions=3), pack_dirs=(tmp_path / "ok",))  # type: ignore[arg-type]
    (tmp_path / "ok").mkdir()
    bomb = tmp_path / "elsewhere" / "pack.yaml"
    bomb.parent.mkdir()
    bomb.write_text("a: &a [1]\n")
    with TestClient(rollout_app(service), raise_server_exceptions=False) as c:
        for pack in (str(bomb), "/etc/passwd", "../../../../etc"):
            resp = c.post("/v1/envs", json={"pack": pack})
            assert resp.status_code == 403, resp.text
        deep = c.post(
            "/v1/envs", content=b"[" * 5000 + b"]" * 5000, headers={"content-type": "application/json"}
        )
        assert deep.status_code == 400
        plain = c.post(
            "/v1/envs", content=b'{"env": "realbench/bank-v1"}', headers={"content-type": "text/plain"}
        )
        assert plain.status_code == 415
        ok = c.post("/v1/envs", json={"env": "realbench/bank-v1", "count": 3})
        assert ok.status_code == 200, ok.text
        flood = c.post("/v1/envs", json={"env": "realbench/bank-v1"})
        assert flood.status_code == 429
        assert c.post("/v1/envs", json={"pack": "bank"}).status_code == 429  # registered, but no room


def test_rollout_client_sends_the_token(monkeypatch):
    from devices.rl.client import RolloutClient
    from devices.rl.service import RolloutServer
    from realbench.errors import RealbenchError

    monkeypatch.setenv("RB_ROLLOUT_TOKEN", "tok-123456")
    security = ServerSecurity(token="tok-123456", allowed_hosts=LOOPBACK_NAMES)
    with RolloutServer(_NoPool(), security=security) as server:  # type: ignore[arg-type]
        assert RolloutClient(server.url, token_env="RB_ROLLOUT_TOKEN").request("GET", "/v1/health")["ok"]
        with pytest.raises(RealbenchError, match="token"):
            RolloutClient(server.url).request("GET", "/v1/health")
