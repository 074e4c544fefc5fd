"""12306's interruptions that answer a step, as drift: the 静音车厢 dialog after 预订, the 订单处理中 wait
screen after 提交订单, and the native 温馨提示 error dialogs (M0013, C0001) in place of the order. Each
carries the texts and view ids public scripts and run notes name, shows once per launch, is closed
by the pack's pop-up rules, and never reaches the clone's state: an error dialog keeps 提交订单 from the
clone, so no order exists until the user submits again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from clones.base import get_clone
from clones.dom_plan import parse
from clones.drift import DRIFT_EVENT, Drift, DriftScreen, drift_profile
from clones.flow_interruptions import (
    BUSY_TEXT,
    CATALOGUE,
    QUEUE_S,
    STALE_TEXT,
    FlowScreen,
    flow_interruptions_of,
)
from clones.interruptions import interruptions_of
from clones.server import create_app
from realbench.errors import UnknownNameError
from realbench.taskpack import load_pack

ROOT = Path(__file__).resolve().parents[1]
TT = "train_ticketing"
PACKAGE = "com.MobileTicket"
# what the evidence names (REAL_APPS.md 1d, 1f, 1g): the texts, and the native dialog's view ids
EVIDENCED = {
    "tt_quiet_carriage": ["静音车厢", "选择", "继续"],
    "tt_order_queue": ["订单处理中"],
    "tt_stale_m0013": ["title", "温馨提示", "content", STALE_TEXT, "sure", "确定"],
    "tt_busy_c0001": ["title", "温馨提示", "content", BUSY_TEXT, "sure", "确定"],
}


@pytest.fixture
def client():
    with TestClient(create_app(), raise_server_exceptions=False) as c:
        yield c


def _facts(markup: str) -> set[str]:
    out: set[str] = set()
    for d in parse(markup, PACKAGE):
        out |= {d.node.text, d.node.content_desc, d.node.short_id}
    return out - {""}


def _session(client: TestClient, flow: list[str], scenario: str = "fresh") -> str:
    body = {"clone": TT, "setup": {"data": {"scenario": scenario}}, "drift": Drift(flow=flow).model_dump()}
    resp = client.post("/api/sessions", json=body)
    assert resp.status_code == 200, resp.text
    return str(resp.json()["session"])


def _event(client: TestClient, sid: str, ev: str, arg: str | None = None) -> dict[str, Any]:
    resp = client.post(f"/api/sessions/{sid}/event", json={"ev": ev, "arg": arg})
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


def _state(client: TestClient, sid: str) -> dict[str, Any]:
    return dict(client.get(f"/api/sessions/{sid}/state").json())


def _html(client: TestClient, sid: str) -> str:
    return str(client.get(f"/s/{sid}/screen").json()["html"])


def test_each_flow_interruption_carries_the_evidenced_texts_and_ids() -> None:
    items = CATALOGUE[TT]
    assert {i.name for i in items} == set(EVIDENCED)
    for item in items:
        assert set(EVIDENCED[item.name]) <= _facts(item.markup), item.name
        assert item.evidence.startswith(("[script]", "[web]")), item.name
    queue = flow_interruptions_of(TT)["tt_order_queue"].markup
    assert any("正在努力为您占座" in t for t in _facts(queue))  # a View containing it, as the script waits


def test_the_flow_profile_arms_them_all_and_an_unknown_one_is_refused() -> None:
    drift = drift_profile("flow", clone=get_clone(TT))
    assert drift.flow == [i.name for i in CATALOGUE[TT]] and not drift.is_none
    assert drift.interruptions == []  # the launch pop-ups stay a profile of their own
    with pytest.raises(UnknownNameError):
        DriftScreen(
            Drift(flow=["tt_nope"]), catalogue=interruptions_of(TT), flow_catalogue=flow_interruptions_of(TT)
        )


def test_an_error_dialog_answers_the_first_submit_and_the_clone_never_sees_it(client: TestClient) -> None:
    sid = _session(client, ["tt_busy_c0001", "tt_stale_m0013"], scenario="mid_booking")
    orders = len(_state(client, sid)["user"]["orders"])
    assert _state(client, sid)["ui"]["route"] == "order_form"
    for name, text in (("tt_busy_c0001", BUSY_TEXT), ("tt_stale_m0013", STALE_TEXT)):
        before = _state(client, sid)
        _event(client, sid, "submit_order")
        html = _html(client, sid)
        assert f'id="rb_{name}"' in html and text in html
        after = _state(client, sid)
        assert len(after["user"]["orders"]) == orders and after["ui"]["route"] == "order_form"
        assert after["user"] == before["user"]
        _event(client, sid, DRIFT_EVENT, name)  # 确定
        assert 'id="rb_' not in _html(client, sid)
    # both spent: the third submit reaches the clone and creates the order
    _event(client, sid, "submit_order")
    state = _state(client, sid)
    assert len(state["user"]["orders"]) == orders + 1 and state["ui"]["route"] == "order_pay"


def test_the_queue_screen_follows_a_submit_and_the_order_is_already_held(client: TestClient) -> None:
    sid = _session(client, ["tt_order_queue"], scenario="mid_booking")
    assert 'id="rb_tt_order_queue"' not in _html(client, sid)
    _event(client, sid, "submit_order")
    html = _html(client, sid)
    assert 'id="rb_tt_order_queue"' in html and "订单处理中" in html
    state = _state(client, sid)
    assert state["ui"]["route"] == "order_pay" and state["user"]["orders"]  # held underneath


def test_the_queue_screen_closes_on_its_own_and_shows_once_per_launch() -> None:
    screen = FlowScreen(["tt_order_queue"], flow_interruptions_of(TT))
    screen.arm()
    screen.after("submit_order", "order_form")  # refused by the check dialog: no queue yet
    assert screen.active(0.0) is None
    screen.after("submit_order", "order_pay")
    assert screen.active(100.0) == "tt_order_queue"
    assert screen.active(100.0 + QUEUE_S - 1) == "tt_order_queue"
    assert screen.active(100.0 + QUEUE_S) is None
    screen.after("submit_order", "order_pay")
    assert screen.active(200.0) is None  # spent until the next launch
    screen.arm()
    screen.after("confirm_submit", "order_pay")
    assert screen.active(300.0) == "tt_order_queue"


def test_the_quiet_carriage_dialog_follows_booking_from_the_list(client: TestClient) -> None:
    sid = _session(client, ["tt_quiet_carriage"])
    _event(client, sid, "search_trains")
    state = _state(client, sid)
    assert state["ui"]["route"] == "train_list", state["ui"]["route"]
    html = _html(client, sid)
    nodes = parse(html, PACKAGE)
    row = next(d for d in nodes if "次列车" in d.node.text and d.node.class_name == "android.widget.Button")
    hit = next(d for d in (row, *row.ancestors()) if "data-ev" in d.attrs)
    _event(client, sid, hit.attrs["data-ev"], hit.attrs.get("data-arg"))
    nodes = parse(_html(client, sid), PACKAGE)
    book = next(d for d in nodes if d.node.text == "预订" and "data-ev" in d.attrs)
    assert 'id="rb_tt_quiet_carriage"' not in _html(client, sid)
    _event(client, sid, book.attrs["data-ev"], book.attrs.get("data-arg"))
    assert _state(client, sid)["ui"]["route"] == "order_form"  # the clone booked as always
    assert 'id="rb_tt_quiet_carriage"' in _html(client, sid)
    _event(client, sid, "__back__")  # back closes the dialog, not the order form
    assert 'id="rb_tt_quiet_carriage"' not in _html(client, sid)
    assert _state(client, sid)["ui"]["route"] == "order_form"


def test_the_packs_popup_rules_close_each_flow_dialog() -> None:
    pack = load_pack(ROOT / "taskpacks" / TT)
    for item in CATALOGUE[TT]:
        nodes = parse(item.markup, PACKAGE)
        rules = [p for p in pack.real_app.popups if any(p.when.matches(d.node) for d in nodes)]
        if item.expires_s is not None:
            assert rules == [], item.name  # a wait screen is waited out, never tapped away
            continue
        assert len(rules) == 1, (item.name, [r.name for r in rules])
        taps = [d for d in nodes if rules[0].tap.matches(d.node)]
        assert len(taps) == 1, item.name
        target = next(d for d in (taps[0], *taps[0].ancestors()) if "data-ev" in d.attrs)
        assert (target.attrs["data-ev"], target.attrs.get("data-arg")) == (DRIFT_EVENT, item.name)
