"""What the CCB dumps and scripts of `michael19831019/transfer` and the 12306 performance scripts
settle (docs/real-apps.md): the clones follow them, the evidence table records them, and a recipe
that goes back to a name they rule out is a contradiction check-pack reports."""

from __future__ import annotations

import re
from pathlib import Path

from starlette.testclient import TestClient

from clones.base import get_clone
from clones.dom_plan import DomNode, DomPlanRunner, parse, screen_page
from clones.server import create_app
from realbench.evidence import EvidenceLevel
from realbench.evidence_report import load_table, real_steps, task_evidence
from realbench.hierarchy import Selector
from realbench.taskpack import CloneSetup, load_pack
from tests.tt_support import CLONE as TRAIN

ROOT = Path(__file__).resolve().parents[1]
BANK_PACK = load_pack(ROOT / "taskpacks" / "bank")
TABLE = load_table(BANK_PACK)
BANK_PACKAGE = get_clone("bank").package
MICHAEL = "michael19831019/transfer"


def _form_nodes() -> list[DomNode]:
    with TestClient(create_app()) as client:
        sid = client.post("/api/sessions", json={"clone": "bank"}).json()["session"]
        client.post(f"/api/sessions/{sid}/event", json={"ev": "open_transfer_home"})
        client.post(f"/api/sessions/{sid}/event", json={"ev": "new_transfer"})
        html = client.get(f"/s/{sid}/screen").json()["html"]
    return parse(html, BANK_PACKAGE)


def _by_id(nodes: list[DomNode], rid: str) -> list[DomNode]:
    sel = Selector(resource_id=rid)
    return [d for d in nodes if d.node is not None and sel.matches(d.node)]


def test_the_clone_form_carries_the_dumped_icon_beside_the_payee_name() -> None:
    nodes = _form_nodes()
    assert not _by_id(nodes, "btn_pick_payee")
    (icon,) = _by_id(nodes, "iv_register_bene")
    (name,) = _by_id(nodes, "et_cash_name")
    # the dump has the icon in the payee-name row: here both sit in one field row
    row = next(a for a in icon.ancestors() if "field-row" in a.attrs.get("class", ""))
    assert row in list(name.ancestors())
    assert icon.attrs.get("data-ev") == "open_payee_picker"


def test_the_table_rules_out_the_old_payee_id_and_a_recipe_using_it_contradicts() -> None:
    assert TABLE is not None
    (key, fact), *_ = TABLE.by_id("iv_register_bene")
    assert (
        fact.level is EvidenceLevel.DUMP and MICHAEL in fact.source and "btn_pick_payee" in fact.wrong_names
    )
    task = BANK_PACK.task("transfer_saved_payee")
    assert not task_evidence(task, TABLE).contradictions
    golden = [
        s.model_copy(update={"tap": Selector(resource_id="btn_pick_payee")})
        if s.tap is not None and s.tap.resource_id == "iv_register_bene"
        else s
        for s in task.real.golden
    ]
    assert golden != task.real.golden
    old = task.model_copy(update={"real": task.real.model_copy(update={"golden": golden})})
    found = task_evidence(old, TABLE).contradictions
    assert found and "iv_register_bene" in found[0] and key in found[0]


def test_the_sms_pages_confirm_label_backs_the_transfer_boundaries() -> None:
    assert TABLE is not None
    facts = [f for _, f in TABLE.by_text("确定") if f.resource_id == "btn_confirm"]
    assert facts and facts[0].level is EvidenceLevel.SCRIPT and MICHAEL in facts[0].source
    # the transfer tasks: those whose boundary stops the confirm dialog's dlg_right_tv
    transfers = [t for t in BANK_PACK.tasks if any(s.resource_id == "dlg_right_tv" for s in t.real.boundary)]
    assert len(transfers) >= 12
    for task in transfers:
        stops = [s for s in real_steps(task) if s.where.startswith("real.boundary")]
        ok = [s for s in stops if any(sel.text == "确定" for sel in s.selectors)]
        assert ok and all(s.level is EvidenceLevel.SCRIPT for s in ok), task.id


def test_the_train_bottom_bar_follows_the_performance_scripts_order() -> None:
    state = TRAIN.build_state(CloneSetup(data={}), {})
    runner = DomPlanRunner(TRAIN, state, {})
    html = screen_page(TRAIN, runner.state)
    bar = re.search(r'<nav class="tt-tabbar">(.*?)</nav>', html, re.S)
    assert bar is not None
    labels = re.findall(r'class="tt-tab[^"]*"[^>]*>([^<]+)</span>', bar.group(1))
    assert labels == ["首页", "出行服务", "订单", "铁路会员", "我的"]
