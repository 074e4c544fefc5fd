"""The CCB side of the real apps' interruptions and of the transfer recipes' evidence: the pop-ups
public scripts dismiss, the bank pack's rules for them (never a commit stop), and the transfer
form reached the way the scripts reach it (grid_function's first item, not a guessed label)."""

from __future__ import annotations

from pathlib import Path

from clones.base import get_clone
from clones.dom_plan import parse
from clones.interruptions import BANK, ID_EXPIRY_TEXT
from realbench.evidence import EvidenceLevel
from realbench.evidence_report import real_steps
from realbench.hierarchy import Hierarchy, Selector
from realbench.taskpack import load_pack

ROOT = Path(__file__).resolve().parents[1]
PACK = load_pack(ROOT / "taskpacks" / "bank")
PACKAGE = get_clone("bank").package


def test_the_script_dismissed_popups_carry_the_scripts_exact_texts() -> None:
    # uiautomator2's text= is an exact match: the script's strings must be whole node texts
    texts = {i.name: {d.node.text for d in parse(i.markup, PACKAGE)} for i in BANK}
    assert "是否需要向银行卡" in texts["ccb_bankcard_prompt"]
    assert ID_EXPIRY_TEXT in texts["ccb_id_expiry"]
    assert ID_EXPIRY_TEXT.startswith("尊敬的客户") and ID_EXPIRY_TEXT.endswith("更新信息。")


def test_popup_rules_never_tap_a_commit_stop() -> None:
    stops = PACK.real_app.forbidden
    for item in BANK:
        nodes = [d.node for d in parse(item.markup, PACKAGE)]
        rule = next(p for p in PACK.real_app.popups if any(p.when.matches(n) for n in nodes))
        tapped = [n for n in nodes if rule.tap.matches(n)]
        assert len(tapped) == 1, item.name
        assert not any(stop.matches(tapped[0]) for stop in stops), (item.name, rule.name)
    # the update dialog carries dlg_right_tv (the transfer's commit stop): the rule takes 取消
    update = [d.node for d in parse(next(i for i in BANK if i.name == "ccb_update").markup, PACKAGE)]
    assert any(Selector(resource_id="dlg_right_tv").matches(n) for n in update)


def test_inside_selects_a_containers_first_child_like_the_scripts_xpath() -> None:
    xml = (
        '<hierarchy><node class="android.widget.GridView" resource-id="p:id/grid_function" '
        'bounds="[0,0][200,100]">'
        '<node class="android.widget.LinearLayout" bounds="[0,0][100,100]">'
        '<node class="android.widget.TextView" text="转账汇款" bounds="[10,10][90,40]"/></node>'
        '<node class="android.widget.LinearLayout" bounds="[100,0][200,100]"/></node>'
        '<node class="android.widget.TextView" text="转账汇款" bounds="[0,200][100,240]"/></hierarchy>'
    )
    tree = Hierarchy(xml)
    first = tree.find_one(Selector.model_validate({"inside": {"resource_id": "grid_function"}}))
    assert first is not None and first.bounds.left == 0 and first.class_name.endswith("LinearLayout")
    scoped = Selector.model_validate({"text": "转账汇款", "inside": {"resource_id": "grid_function"}})
    assert [n.bounds.top for n in tree.find(scoped)] == [10]  # not the one outside the grid
    filled = Selector.model_validate({"inside": {"text": "{x}"}}).format({"x": "转账汇款"})
    assert filled.inside is not None and filled.inside.text == "转账汇款"


def test_the_clones_transfer_home_first_grid_item_opens_the_form() -> None:
    from starlette.testclient import TestClient

    from clones.server import create_app

    with TestClient(create_app()) as client:
        sid = client.post("/api/sessions", json={"clone": "bank"}).json()["session"]
        client.post(f"/api/sessions/{sid}/event", json={"ev": "open_transfer_home"})
        html = client.get(f"/s/{sid}/screen").json()["html"]
    nodes = parse(html, PACKAGE)
    grid = Selector.model_validate({"inside": {"resource_id": "grid_function"}})
    first = next(d for d in nodes if grid.matches(d.node))
    target = next(d for d in (first, *first.ancestors()) if "data-ev" in d.attrs)
    assert target.attrs["data-ev"] == "new_transfer"


def test_no_transfer_recipe_claims_script_for_a_label_no_script_uses() -> None:
    for task in PACK.tasks:
        for step in real_steps(task):
            if step.level not in (EvidenceLevel.SCRIPT, EvidenceLevel.DUMP):
                continue
            for sel in step.selectors:
                assert sel.text not in ("转账汇款", "本行"), (task.id, step.where)
