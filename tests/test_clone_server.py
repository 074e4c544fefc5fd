"""The clone server's JSON API and pages, through Starlette's TestClient (no browser)."""

from __future__ import annotations

import socket
import threading

import httpx
import pytest
from starlette.testclient import TestClient

from clones.server import CloneServer, bind_socket, create_app
from clones.toy import TOY, ToyShop
from realbench.errors import ServerError
from realbench.taskpack import CloneSetup
from tests.other_toy import OTHER_TOY

pytestmark = pytest.mark.usefixtures("other_toy")


@pytest.fixture
def client():
    with TestClient(create_app(), raise_server_exceptions=False) as c:
        yield c


def new_session(client: TestClient, **body) -> str:
    resp = client.post("/api/sessions", json={"clone": TOY, **body})
    assert resp.status_code == 200, resp.text
    return resp.json()["session"]


def event(client: TestClient, sid: str, ev: str, arg=None, form=None, long_press=False) -> dict:
    resp = client.post(
        f"/api/sessions/{sid}/event",
        json={"ev": ev, "arg": arg, "form": form or {}, "long_press": long_press},
    )
    assert resp.status_code == 200, resp.text
    return resp.json()


def state(client: TestClient, sid: str) -> dict:
    return client.get(f"/api/sessions/{sid}/state").json()


def test_create_builds_state_from_setup_and_serves_page(client):
    sid = new_session(client, setup={"seed": 3, "clock": "2026-03-05T08:30:00"})
    st = state(client, sid)
    assert st["clock"] == "2026-03-05T08:30:00"
    assert st["ui"]["route"] == "home"
    assert st["world"] == ToyShop().build_state(CloneSetup(seed=3), {})["world"]
    page = client.get(f"/s/{sid}")
    assert page.status_code == 200
    assert f'data-session="{sid}"' in page.text and 'data-package="com.example.toyshop"' in page.text
    assert "window.__rb" in page.text and ".rb-statusbar" in page.text
    assert ">08:30<" in page.text  # the status bar shows the virtual clock
    assert ToyShop().render(st) in page.text  # the clone's screen, verbatim


def test_a_page_without_its_screen_has_the_shell_and_an_empty_app(client):
    sid = new_session(client, setup={"seed": 3, "clock": "2026-03-05T08:30:00"})
    page = client.get(f"/s/{sid}?screen=none")
    assert page.status_code == 200
    assert '<div id="app"></div>' in page.text and "window.__rb" in page.text
    assert ToyShop().render(state(client, sid)) not in page.text and ">08:30<" not in page.text
    assert f'data-session="{sid}"' in page.text


def test_events_navigate_bump_version_and_return_screen(client):
    sid = new_session(client)
    v0 = client.get(f"/s/{sid}/screen").json()["version"]
    out = event(client, sid, "open_list")
    assert out["version"] == v0 + 1 and out["route"] == "list"
    assert 'id="item_list"' in out["html"]
    out = event(client, sid, "open_item", arg=4)  # a number is accepted as the argument's text
    assert out["route"] == "item"
    assert state(client, sid)["ui"]["args"] == {"item": 4}
    out = event(client, sid, "__back__")
    assert out["route"] == "list"
    event(client, sid, "__home__")
    assert state(client, sid)["ui"]["stack"] == []


def test_form_fields_are_stored_as_drafts(client):
    sid = new_session(client)
    event(client, sid, "__sync__", form={"query": "火车"})
    assert state(client, sid)["ui"]["form"]["query"] == "火车"
    event(client, sid, "search", form={"query": "积木"})
    assert state(client, sid)["user"]["searches"] == ["积木"]


def test_refused_action_shows_toast_and_leaves_state(client):
    sid = new_session(client, setup={"seed": 1})
    items = state(client, sid)["world"]["items"]
    empty = next(i for i in items if i["stock"] == 0)
    event(client, sid, "open_item", arg=empty["id"])
    out = event(client, sid, "buy", form={"qty": "2"})
    assert "库存不足" in out["html"] and 'class="toast"' in out["html"]
    st = state(client, sid)
    assert st["user"]["orders"] == [] and st["ui"]["toast"] == "库存不足"
    assert st["ui"]["form"]["qty"] == "2"
    event(client, sid, "__sync__")
    assert state(client, sid)["ui"]["toast"] is None  # the toast goes with the next event


def test_handler_bug_is_500_and_state_unchanged(client, caplog):
    sid = new_session(client, clone=OTHER_TOY)  # the test-only toy with a broken handler
    before = state(client, sid)
    resp = client.post(f"/api/sessions/{sid}/event", json={"ev": "boom"})
    assert resp.status_code == 500
    assert "Traceback" in caplog.text and "a bug in a handler" in caplog.text
    assert state(client, sid)["user"] == before["user"]


def test_unknown_event_is_a_toast_not_an_error(client):
    sid = new_session(client)
    out = event(client, sid, "no_such_event")
    assert "no_such_event" in out["html"]


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"ev": ""}, 400),
        ({"arg": "x"}, 400),
        ({"ev": "open_list", "form": "nope"}, 400),
        ({"ev": "open_list", "extra": 1}, 400),
        ([1, 2], 400),
    ],
)
def test_malformed_event_bodies_are_400(client, body, status):
    sid = new_session(client)
    resp = client.post(f"/api/sessions/{sid}/event", json=body)
    assert resp.status_code == status
    assert resp.json()["error"]


def test_not_json_is_400_and_unknown_session_is_404(client):
    sid = new_session(client)
    resp = client.post(
        f"/api/sessions/{sid}/event", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert resp.status_code == 400
    for method, path in [
        ("GET", "/api/sessions/nope/state"),
        ("POST", "/api/sessions/nope/event"),
        ("POST", "/api/sessions/nope/snapshot"),
        ("DELETE", "/api/sessions/nope"),
        ("GET", "/s/nope"),
        ("GET", "/s/nope/screen"),
    ]:
        assert client.request(method, path, json={"ev": "x"}).status_code == 404, path


def test_unknown_clone_and_bad_state_are_400(client):
    resp = client.post("/api/sessions", json={"clone": "no_such_clone"})
    assert resp.status_code == 400 and "no_such_clone" in resp.json()["error"]
    assert resp.json()["hint"].startswith("known clones")
    resp = client.post("/api/sessions", json={"clone": TOY, "state": {"world": {}}})
    assert resp.status_code == 400
    sid = new_session(client)
    assert client.put(f"/api/sessions/{sid}/state", json={"ui": {}}).status_code == 400


def test_put_state_snapshot_diff_restore(client):
    sid = new_session(client)
    snap = client.post(f"/api/sessions/{sid}/snapshot").json()["snapshot"]
    event(client, sid, "open_list")
    event(client, sid, "fav", arg=7, long_press=True)
    changes = client.get(f"/api/sessions/{sid}/diff", params={"snapshot": snap}).json()["changes"]
    paths = {c["path"] for c in changes}
    assert "/user/favs" in paths and "/ui/route" in paths
    # the baseline (state at creation) is the default reference
    assert client.get(f"/api/sessions/{sid}/diff").json()["changes"] == changes
    restored = client.post(f"/api/sessions/{sid}/restore", json={"snapshot": snap}).json()
    assert restored["route"] == "home" and "玩具店" in restored["html"]
    assert state(client, sid)["user"]["favs"] == []
    # restore from a full state, and put a state
    st = state(client, sid)
    st["user"]["favs"] = [1, 2]
    client.put(f"/api/sessions/{sid}/state", json=st)
    assert state(client, sid)["user"]["favs"] == [1, 2]
    st["user"]["favs"] = [3]
    client.post(f"/api/sessions/{sid}/restore", json={"state": st})
    assert state(client, sid)["user"]["favs"] == [3]
    assert client.get(f"/api/sessions/{sid}/diff").json()["changes"] == []  # restore sets a new baseline
    # rebuild from a setup
    client.post(f"/api/sessions/{sid}/restore", json={"setup": {"seed": 9, "route": "list"}})
    assert state(client, sid)["ui"]["route"] == "list"
    assert client.post(f"/api/sessions/{sid}/restore", json={}).status_code == 400
    assert client.post(f"/api/sessions/{sid}/restore", json={"snapshot": "snap-missing"}).status_code == 404


def test_snapshot_restores_into_another_session_of_the_same_clone_only(client):
    a, b = new_session(client), new_session(client)
    other = client.post("/api/sessions", json={"clone": "toy_other"}).json()["session"]
    event(client, a, "open_list")
    snap = client.post(f"/api/sessions/{a}/snapshot").json()["snapshot"]
    assert client.post(f"/api/sessions/{b}/restore", json={"snapshot": snap}).status_code == 200
    assert state(client, b)["ui"]["route"] == "list"
    resp = client.post(f"/api/sessions/{other}/restore", json={"snapshot": snap})
    assert resp.status_code == 400
    assert "toy_shop" in resp.json()["error"] and "toy_other" in resp.json()["error"]
    assert resp.json()["hint"]


def test_delete_and_list_clones_and_health(client):
    sid = new_session(client)
    assert client.get("/healthz").json() == {"ok": True, "sessions": 1}
    assert client.delete(f"/api/sessions/{sid}").status_code == 200
    assert client.get(f"/api/sessions/{sid}/state").status_code == 404
    names = {c["name"]: c for c in client.get("/api/clones").json()["clones"]}
    assert names[TOY]["package"] == "com.example.toyshop" and "list" in names[TOY]["routes"]
    assert client.get("/static/runtime.js").status_code == 200


def test_generic_dialog_from_ui_dialog(client):
    sid = new_session(client)
    st = state(client, sid)
    st["ui"]["dialog"] = {
        "title": "提示",
        "message": "确定吗",
        "buttons": [{"label": "确定", "ev": "open_list"}],
    }
    client.put(f"/api/sessions/{sid}/state", json=st)
    html = client.get(f"/s/{sid}/screen").json()["html"]
    assert 'class="modal"' in html and 'data-ev="open_list"' in html and "确定吗" in html


def test_concurrent_sessions_never_mix_state(client):
    sids = [new_session(client) for _ in range(8)]
    errors: list[str] = []

    def worker(index: int, sid: str) -> None:
        try:
            for n in range(15):
                event(client, sid, "fav", arg=index * 100 + n, long_press=True)
        except Exception as exc:  # surfaced below; a thread cannot fail the test itself
            errors.append(repr(exc))

    threads = [threading.Thread(target=worker, args=(i, s)) for i, s in enumerate(sids)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    for i, sid in enumerate(sids):
        assert state(client, sid)["user"]["favs"] == [i * 100 + n for n in range(15)]


def test_taken_port_is_a_server_error_with_hint():
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    try:
        with pytest.raises(ServerError) as info:
            bind_socket("127.0.0.1", port)
        assert "already in use" in str(info.value) and info.value.hint and "--port" in info.value.hint
        with pytest.raises(ServerError):
            CloneServer(port=port).start()
    finally:
        holder.close()


def test_clone_server_runs_in_background_and_stops():
    with CloneServer() as server:
        resp = httpx.post(f"{server.url}/api/sessions", json={"clone": TOY})
        sid = resp.json()["session"]
        assert httpx.get(f"{server.url}/s/{sid}").status_code == 200
        url = server.url
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/healthz", timeout=1)


def test_serve_cli_reports_taken_port():
    from typer.testing import CliRunner

    from realbench.cli import app

    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    try:
        result = CliRunner().invoke(app, ["serve", "--port", str(holder.getsockname()[1])])
    finally:
        holder.close()
    assert result.exit_code != 0
    assert isinstance(result.exception, ServerError) or "already in use" in result.output


def test_toast_is_drawn_once_when_the_clone_draws_it():
    from clones.server import Session, render_screen

    class DrawsToast(ToyShop):
        def render(self, state):
            toast = state["ui"]["toast"]
            return super().render(state) + (f'<div class="my-toast">{toast}</div>' if toast else "")

    for clone, expected in ((ToyShop(), 1), (DrawsToast(), 1)):
        state = clone.build_state(CloneSetup(), {})
        state["ui"]["toast"] = "库存不足"
        html = render_screen(Session(id="s", clone=clone, state=state))
        assert html.count("库存不足") == expected


def test_index_and_new_session_buttons_for_people(client):
    assert 'method="post" action="/new/toy_shop"' in client.get("/").text
    resp = client.post("/new/toy_shop?drift=mild&seed=3", follow_redirects=False)
    assert resp.status_code == 303 and resp.headers["location"].startswith("/s/")
    page = client.get(resp.headers["location"])
    assert page.status_code == 200 and "跳过" in page.text
    assert client.post("/new/nope").status_code == 400
    assert client.post("/new/toy_shop?seed=x").status_code == 400
    # creating a session is never a GET: an <img src> on any page must not make one
    before = client.get("/healthz").json()["sessions"]
    assert client.get("/new/toy_shop").status_code == 405
    assert client.get("/healthz").json()["sessions"] == before
