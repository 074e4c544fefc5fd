"""The real apps' interruptions as drift: shown in order with the real view ids and button texts,
dismissed by tapping, the clone's state untouched, and the packs' pop-up rules dismiss each one
(browser-free, on the served markup; a virtual phone for the rules through uiautomator2)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from clones.base import get_clone
from clones.dom_plan import parse
from clones.drift import DRIFT_EVENT, drift_profile
from clones.interruptions import CATALOGUE
from clones.server import create_app
from realbench.errors import UnknownNameError
from realbench.taskpack import load_pack

ROOT = Path(__file__).resolve().parents[1]
PACKS = {"train_ticketing": "train_ticketing", "bank": "bank"}
# view ids and texts public ad-skip rule sets name (REAL_APPS.md), which the overlays must carry
EVIDENCED = {
    "tt_upgrade": ["cancel_btn", "稍后再说", "ok_btn", "立即安装"],
    "tt_location": ["img_close", "开启定位权限"],
    "tt_student": ["cancel"],
    "tt_prefill": ["sure", "预填信息购票"],
    "tt_announcement": ["iv_tip_close", "关闭公告"],
    "ccb_start_dialog": ["close", "tip_view_pager"],
    "ccb_vpn_risk": ["知晓风险，继续使用"],
    # public scripts match these (termux_control): the whole texts and the ids they tap
    "ccb_float_window": ["close"],
    "ccb_bankcard_prompt": ["是否需要向银行卡", "btn_cancel"],
    "ccb_id_expiry": [
        "尊敬的客户，您在我行存留的身份证件即将到期，为避免影响您办理业务，请尽快到建行手机银行、网上银行或网点等渠道更新信息。",
        "btn_cancel",
    ],
    "ccb_update": ["dialog_content_scroll", "dlg_left_tv", "取消", "dlg_right_tv", "去更新"],
    "ccb_storage_permission": ["tv_dlg_content", "dlg_left_tv"],
}


@pytest.fixture
def client():
    with TestClient(create_app(), raise_server_exceptions=False) as c:
        yield c


def _facts(markup: str, package: str) -> set[str]:
    out: set[str] = set()
    for d in parse(markup, package):
        out |= {d.node.text, d.node.content_desc, d.node.short_id}
    return out - {""}


def test_every_interruption_carries_the_evidenced_ids_and_texts() -> None:
    names = {i.name for items in CATALOGUE.values() for i in items}
    assert names == set(EVIDENCED)
    for clone_name, items in CATALOGUE.items():
        package = get_clone(clone_name).package
        for item in items:
            assert set(EVIDENCED[item.name]) <= _facts(item.markup, package), item.name
            assert item.evidence.startswith(("[rules]", "[script]"))


@pytest.mark.parametrize("clone_name", sorted(CATALOGUE))
def test_interruptions_show_in_order_dismiss_and_leave_the_state_alone(
    client: TestClient, clone_name: str
) -> None:
    drift = drift_profile("interruptions", clone=get_clone(clone_name))
    assert drift.interruptions == [i.name for i in CATALOGUE[clone_name]]
    sid = client.post("/api/sessions", json={"clone": clone_name, "drift": drift.model_dump()}).json()[
        "session"
    ]
    before = client.get(f"/api/sessions/{sid}/state").json()
    for item in CATALOGUE[clone_name]:
        html = client.get(f"/s/{sid}/screen").json()["html"]
        assert f'id="rb_{item.name}"' in html
        others = [i.name for i in CATALOGUE[clone_name] if i.name != item.name]
        assert not any(f'id="rb_{o}"' in html for o in others)
        resp = client.post(f"/api/sessions/{sid}/event", json={"ev": DRIFT_EVENT, "arg": item.name})
        assert resp.status_code == 200
    assert 'id="rb_' not in client.get(f"/s/{sid}/screen").json()["html"]
    assert client.get(f"/api/sessions/{sid}/state").json() == before


def test_back_closes_the_front_interruption(client: TestClient) -> None:
    drift = drift_profile("interruptions", clone=get_clone("bank"))
    sid = client.post("/api/sessions", json={"clone": "bank", "drift": drift.model_dump()}).json()["session"]
    client.post(f"/api/sessions/{sid}/event", json={"ev": "__back__"})
    html = client.get(f"/s/{sid}/screen").json()["html"]
    assert 'id="rb_ccb_start_dialog"' not in html and 'id="rb_ccb_vpn_risk"' in html


def test_an_unknown_interruption_is_refused() -> None:
    from clones.drift import Drift, DriftScreen
    from clones.interruptions import interruptions_of

    with pytest.raises(UnknownNameError):
        DriftScreen(Drift(interruptions=["tt_nope"]), catalogue=interruptions_of("train_ticketing"))


@pytest.mark.parametrize("clone_name", sorted(CATALOGUE))
def test_the_packs_popup_rules_dismiss_each_interruption(clone_name: str) -> None:
    pack = load_pack(ROOT / "taskpacks" / PACKS[clone_name])
    package = get_clone(clone_name).package
    for item in CATALOGUE[clone_name]:
        nodes = parse(item.markup, package)
        rules = [p for p in pack.real_app.popups if any(p.when.matches(d.node) for d in nodes)]
        assert len(rules) == 1, (item.name, [r.name for r in rules])
        taps = [d for d in nodes if rules[0].tap.matches(d.node)]
        assert len(taps) == 1, item.name
        target = next(d for d in (taps[0], *taps[0].ancestors()) if "data-ev" in d.attrs)
        assert (target.attrs["data-ev"], target.attrs.get("data-arg")) == (DRIFT_EVENT, item.name)


@pytest.mark.farm
@pytest.mark.browser
@pytest.mark.skipif(shutil.which("adb") is None, reason="needs Debian's adb")
@pytest.mark.skipif(
    not Path(os.environ.get("REALBENCH_CHROMIUM", "/usr/bin/chromium")).exists(), reason="needs Chromium"
)
@pytest.mark.parametrize(
    ("app", "dismissed", "home"),
    [
        (
            "train_ticketing",
            [
                "upgrade dialog",
                "location permission prompt",
                "student-ticket pop-up",
                "预填信息购票 dialog",
                "announcement banner",
            ],
            "ticket_home_btn_search",
        ),
        (
            "bank",
            [
                "floating window or start-up ad",
                "VPN-risk dialog",
                "floating window or start-up ad",
                "是否需要向银行卡 dialog",
                "ID-expiry notice",
                "update dialog",
                "storage-permission dialog",
            ],
            "main_home_smart_transfer",
        ),
    ],
)
def test_a_virtual_phone_with_interruptions_is_cleared_by_the_pack_rules(
    adb_server_port: int, app: str, dismissed: list[str], home: str
) -> None:
    pytest.importorskip("uiautomator2")
    from devices.farm.health import dismiss_popups
    from devices.phone import PhoneDevice
    from devices.virtual import InputKind, VirtualPhoneHost
    from realbench.hierarchy import Hierarchy, Selector

    pack = load_pack(ROOT / "taskpacks" / app)
    with VirtualPhoneHost() as host:
        host.start(1, screens="clone", drift="interruptions")
        host.adb_connect(adb_server_port)
        vphone = host.phones[0]
        phone = PhoneDevice(vphone.serial, virtual=True)
        try:
            phone.start_app(pack.real_app.package)
            start = len(vphone.events)
            gone = dismiss_popups(phone, pack.real_app.popups)
            tree = Hierarchy(phone.hierarchy())
        finally:
            phone.close()
        taps = [e for e in vphone.events.events(start) if e.kind is InputKind.TAP]
    assert gone == dismissed
    assert len(taps) == len(gone)  # the phone's own input log: one tap per pop-up
    assert tree.find_one(Selector(resource_id=home)) is not None
    assert not [n for n in tree.nodes if n.short_id.startswith("rb_")]
