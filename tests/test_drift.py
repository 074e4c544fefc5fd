"""Drift profiles and their effect on served screens (TestClient, no browser)."""

from __future__ import annotations

import time

import pytest
from starlette.testclient import TestClient

from clones.base import get_clone
from clones.drift import Drift, DriftScreen, Overlay, drift_profile, relabel_html
from clones.server import create_app
from clones.toy import TOY
from realbench.errors import UnknownNameError


@pytest.fixture
def client():
    with TestClient(create_app(), raise_server_exceptions=False) as c:
        yield c


def session(client: TestClient, drift=None, seed: int = 2) -> str:
    body = {"clone": TOY, "setup": {"seed": seed}}
    if drift is not None:
        body["drift"] = drift
    resp = client.post("/api/sessions", json=body)
    assert resp.status_code == 200, resp.text
    return resp.json()["session"]


def screen(client: TestClient, sid: str) -> str:
    return client.get(f"/s/{sid}/screen").json()["html"]


def tap(client: TestClient, sid: str, ev: str, arg: str | None = None) -> str:
    resp = client.post(f"/api/sessions/{sid}/event", json={"ev": ev, "arg": arg})
    assert resp.status_code == 200, resp.text
    return resp.json()["html"]


def test_undrifted_clone_is_unchanged_byte_for_byte(client):
    plain, none, named = (
        session(client),
        session(client, drift=Drift().model_dump()),
        session(client, drift="none"),
    )
    pages = [client.get(f"/s/{sid}").text.replace(sid, "SID") for sid in (plain, none, named)]
    assert pages[0] == pages[1] == pages[2]
    for sid in (plain, none, named):
        tap(client, sid, "open_list")
    screens = {screen(client, sid) for sid in (plain, none, named)}
    assert len(screens) == 1
    state = client.get(f"/api/sessions/{plain}/state").json()
    assert get_clone(TOY).render(state) in screens.pop()


def test_relabel_changes_visible_text_only(client):
    sid = session(client, drift={"relabel": {"购买": "立即购买", "搜索": "查找"}})
    html = screen(client, sid)
    assert 'placeholder="查找商品"' in html
    tap(client, sid, "open_item", "1")
    html = screen(client, sid)
    assert ">立即购买<" in html and 'data-ev="buy"' in html and ">购买<" not in html
    assert (
        relabel_html('<a data-ev="购买" title="购买">购买</a>', {"购买": "下单"})
        == '<a data-ev="购买" title="购买">下单</a>'
    )


def test_overlays_show_in_order_and_dismiss_by_tapping(client):
    sid = session(client, drift="heavy")
    html = screen(client, sid)
    assert "跳过 5" in html and 'data-countdown="5"' in html and 'class="modal rb-drift-ad"' in html
    html = tap(client, sid, "__drift__", "launch_ad")
    assert "发现新版本" in html and "以后再说" in html and "跳过" not in html
    html = tap(client, sid, "__back__")  # back closes a dialog, the app's own back stack is untouched
    assert "允许通知" in html and "不允许" in html
    html = tap(client, sid, "__drift__", "notification_prompt")
    assert 'class="modal' not in html
    state = client.get(f"/api/sessions/{sid}/state").json()
    assert state["ui"]["route"] == "home" and state["ui"]["stack"] == []
    # a reset is an app launch: the overlays come back
    client.post(f"/api/sessions/{sid}/restore", json={"setup": {"seed": 2}})
    assert "跳过" in screen(client, sid)


def test_launch_ad_times_out():
    ds = DriftScreen(Drift(launch_ad=True, ad_countdown_s=3, update_dialog=True))
    ds.arm()
    assert "跳过 3" in ds.overlay_html("app", now=100.0)
    assert "跳过 2" in ds.overlay_html("app", now=101.2)
    after = ds.overlay_html("app", now=103.0)
    assert "跳过" not in after and "发现新版本" in after
    assert ds.active is Overlay.UPDATE_DIALOG


def test_layout_shift_latency_and_data_seed(client):
    sid = session(client, drift={"layout_shift_px": 30, "latency_ms": 120})
    assert 'class="rb-drift-shift" style="height:30px"' in screen(client, sid)
    start = time.perf_counter()
    tap(client, sid, "open_list")
    assert time.perf_counter() - start >= 0.12
    plain = client.get(f"/api/sessions/{session(client)}/state").json()["world"]
    reseeded = client.get(f"/api/sessions/{session(client, drift={'data_seed': 77})}/state").json()["world"]
    assert plain != reseeded


def test_profiles_are_seeded_and_use_the_clone_relabels():
    clone = get_clone(TOY)
    assert drift_profile("none").is_none
    mild = drift_profile("mild", seed=4, clone=clone)
    assert mild == drift_profile("mild", seed=4, clone=clone)
    assert mild.launch_ad and not mild.update_dialog and mild.latency_ms > 0
    assert mild.relabel and set(mild.relabel.items()) <= set(clone.drift_relabels.items())
    assert {drift_profile("mild", seed=s, clone=clone).layout_shift_px for s in range(6)} != {
        mild.layout_shift_px
    }
    heavy = drift_profile("heavy", seed=1, clone=clone)
    assert heavy.relabel == clone.drift_relabels and heavy.data_seed is not None
    assert heavy.overlays() == [Overlay.LAUNCH_AD, Overlay.UPDATE_DIALOG, Overlay.NOTIFICATION_PROMPT]
    with pytest.raises(UnknownNameError):
        drift_profile("stormy")


def test_bad_drift_is_400(client):
    resp = client.post("/api/sessions", json={"clone": TOY, "drift": {"latency_ms": -5}})
    assert resp.status_code == 400
    resp = client.post("/api/sessions", json={"clone": TOY, "drift": "stormy"})
    assert resp.status_code == 400 and "stormy" in resp.json()["error"]
