"""Real-side recipes: the typed schema, the recipes file, account fixtures and the manual-precondition stop."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from devices.fixtures import uninstantiable
from devices.pack_run import run_pack
from devices.real_gate import check_manual
from devices.rig import load_rig, parse_rig
from realbench.cli import app as cli_app
from realbench.errors import ConfigError, PackError
from realbench.recipes import AccountFixture, FixtureField, RealGate, draw_from_fixture, fixture_gaps
from realbench.run_config import RunConfig
from realbench.taskpack import ReadAnswer, check_pack, instantiate_from_fixture, load_pack, parse_pack

ROOT = Path(__file__).resolve().parents[1]
PACKS = {name: load_pack(ROOT / "taskpacks" / name) for name in ("train_ticketing", "bank")}


@pytest.mark.parametrize("name", sorted(PACKS))
def test_every_task_has_a_typed_real_setup_and_prose_only_as_manual(name: str) -> None:
    pack = PACKS[name]
    for task in pack.tasks:
        assert task.real.setup, task.id
        assert all(hasattr(step, "do") for step in task.real.setup), task.id
        assert all(isinstance(line, str) and line for line in task.real.manual), task.id
    assert check_pack(pack) == []


@pytest.mark.parametrize("name", sorted(PACKS))
def test_real_golden_plans_stop_at_the_boundary_or_the_answer(name: str) -> None:
    pack = PACKS[name]
    with_plan = [t for t in pack.tasks if t.real.golden]
    assert len(with_plan) >= len(pack.tasks) // 2
    for task in with_plan:
        last = task.real.golden[-1]
        assert all(s.terminate is None for s in task.real.golden), task.id
        if task.real.boundary:
            # the boundary control, by whatever selector the plan uses (certify checks the interlock stops it)
            assert last.tap is not None, task.id
        else:
            assert last.answer is not None, task.id
    for task in pack.tasks:
        if not task.real.golden:
            assert task.real.unmatched, f"{task.id}: why there is no real plan must be listed"


def test_evidence_ids_replace_clone_selectors_and_the_clone_shows_them() -> None:
    task = PACKS["train_ticketing"].task("lookup-earliest-train")
    assert (
        task.real.golden[0].tap is not None
        and task.real.golden[0].tap.resource_id == "ticket_home_btn_search"
    )
    # the clone plan sets the sampled trip first, then taps the button by its text
    assert any(s.tap is not None and s.tap.text == "查询车票" for s in task.golden)
    home = (ROOT / "clones" / "train_ticketing" / "templates" / "home.html").read_text(encoding="utf-8")
    assert 'id="ticket_home_btn_search">查询车票' in home
    assert "hp_query_button" not in home
    # the train number is read from the list's row string (spaced in the real app), not a clone id
    read = task.real.golden[-1].answer
    assert isinstance(read, ReadAnswer) and read.read.text_contains == "次列车"
    assert "ticket_home_btn_search" not in " ".join(task.real.unmatched)


def test_probes_are_only_shown_logged_in_and_versions_are_pinned() -> None:
    for pack in PACKS.values():
        probe = pack.real_app.logged_in_probe
        assert probe is not None and probe.text not in ("我的", "首页")
        assert pack.real_app.version
    assert PACKS["train_ticketing"].real_app.probe_via


def _raw(name: str) -> dict[str, Any]:
    raw: dict[str, Any] = yaml.safe_load(
        (ROOT / "taskpacks" / name / "pack.yaml").read_text(encoding="utf-8")
    )
    return raw


def test_recipes_file_refuses_a_field_set_twice_and_unknown_tasks(tmp_path: Path) -> None:
    raw = _raw("bank")
    raw["tasks"][0].setdefault("real", {})["golden"] = [{"answer": "1"}]
    (tmp_path / "pack.yaml").write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    recipes = {"tasks": {raw["tasks"][0]["id"]: {"golden": [{"answer": "2"}]}, "no-such-task": {"setup": []}}}
    (tmp_path / "real.yaml").write_text(yaml.safe_dump(recipes, allow_unicode=True), encoding="utf-8")
    with pytest.raises(PackError) as exc:
        load_pack(tmp_path)
    text = str(exc.value)
    assert "set both in the pack and in the recipes file" in text and "no-such-task" in text


def test_setup_steps_are_a_discriminated_union_with_expectations() -> None:
    raw = _raw("bank")
    task = raw["tasks"][0]
    task["real"] = {
        "manual": ["账户里有两张借记卡"],
        "setup": [
            {"do": "launch"},
            {"do": "deep_link", "url": "ccbmobile://home"},
            {"do": "wait_for", "selector": {"text_contains": "总资产"}, "timeout_s": 3},
            {"do": "scroll", "selector": {"text": "更多"}, "direction": "up"},
            {"do": "type", "text": "x", "into": {"resource_id": "search"}},
            {"do": "back"},
            {"do": "home", "expect": [{"selector": {"text": "首页"}, "state": "absent"}]},
        ],
    }
    pack = parse_pack(raw)
    kinds = [s.do for s in pack.tasks[0].real.setup]
    assert kinds == ["launch", "deep_link", "wait_for", "scroll", "type", "back", "home"]
    task["real"]["setup"] = [{"do": "swipe_somewhere"}]
    with pytest.raises(PackError, match=r"real\.setup\.0"):
        parse_pack(raw)


def test_a_real_plan_that_goes_past_its_boundary_is_refused() -> None:
    raw = _raw("bank")
    task = next(t for t in raw["tasks"] if t["id"] == "transfer_saved_payee")
    recipe = PACKS["bank"].task("transfer_saved_payee").real.model_dump(mode="json", exclude_none=True)
    recipe["golden"] = [*recipe["golden"], {"tap": {"text": "完成"}}]
    task["real"] = recipe
    problems = check_pack(parse_pack(raw))
    assert any(p.field.startswith("real.golden") and "past a commit boundary" in p.message for p in problems)


def test_fixture_gaps_and_draws() -> None:
    gate = RealGate(params={"payee": FixtureField.PAYEES}, holds={FixtureField.CARD_TAILS: ["5678"]})
    choices: dict[str, list[Any] | None] = {"payee": ["王芳", "陈静", "刘洋"]}
    held = AccountFixture(payees=["陈静", "赵磊"], card_tails=["5678"])
    assert fixture_gaps(gate, choices, held) == []
    assert draw_from_fixture("t", 0, gate, choices, held) == {"payee": "陈静"}  # the one allowed and held
    poor = AccountFixture(payees=["赵磊"])
    gaps = fixture_gaps(gate, choices, poor)
    assert any("payee" in g for g in gaps) and any("5678" in g for g in gaps)
    assert fixture_gaps(gate, choices, None) == ["the account declares no fixture"]


def test_real_side_parameters_come_from_the_account() -> None:
    task = PACKS["bank"].task("payee_account_tail")
    assert task.real.fixtures.params == {"payee": FixtureField.PAYEES}
    clone_values = {
        str(task.instantiate(s, task.clone.setup.clock.date()).params["payee"]) for s in range(20)
    }
    fixture = AccountFixture(payees=["赵磊"])
    for seed in range(5):
        inst = instantiate_from_fixture(task, seed, task.clone.setup.clock.date(), fixture)
        assert inst.params["payee"] == "赵磊" and "赵磊" in inst.instruction
    assert len(clone_values) > 1


def _clone_holdings() -> dict[str, dict[str, set[str]]]:
    import clones.registry  # noqa: F401
    from clones.base import get_clone
    from realbench.taskpack import CloneSetup

    bank = get_clone("bank").build_state(CloneSetup(), {})
    train = get_clone("train_ticketing").build_state(CloneSetup(), {})
    billers = [b for b in bank["world"]["billers"].values() if isinstance(b, dict)]
    return {
        "com.chinamworld.main": {
            "card_tails": {a["card_no"][-4:] for a in bank["user"]["accounts"]},
            "payees": {p["name"] for p in bank["user"]["payees"]},
            "bill_accounts": {a["account_no"] for b in billers for a in b.get("accounts", [])},
            "funds": {f["name"] for f in bank["world"]["funds"]},
            "branches": {b["name"] for b in bank["world"]["branches"]},
        },
        "com.MobileTicket": {
            "passengers": {p["name"] for p in train["user"]["passengers"]},
            "routes": {r.replace("|", "-") for r in train["user"]["recent_searches"]},
        },
    }


def test_virtual_rig_fixtures_match_what_the_clone_apps_hold() -> None:
    rig = load_rig(ROOT / "rigs" / "virtual.yaml")
    assert rig.virtual is not None and set(rig.virtual.accounts) == {a.name for a in rig.accounts}
    truth = _clone_holdings()
    for account in rig.accounts:
        assert account.fixture is not None
        for field, values in truth[account.app].items():
            assert set(getattr(account.fixture, field)) == values, (account.name, field)


def test_check_pack_with_a_rig_lists_tasks_its_accounts_cannot_instantiate(tmp_path: Path) -> None:
    virtual = load_rig(ROOT / "rigs" / "virtual.yaml")
    assert all(uninstantiable(p, virtual) == [] for p in PACKS.values())
    poor = parse_rig(
        {
            "name": "poor",
            "phones": [{"serial": "X1", "profile": "generic-1080x2400", "accounts": ["b"]}],
            "accounts": [{"name": "b", "app": "com.chinamworld.main", "fixture": {"payees": ["赵磊"]}}],
        }
    )
    gaps = {g.task: g for g in uninstantiable(PACKS["bank"], poor)}
    assert "balance_main_card" in gaps and "5678" in gaps["balance_main_card"].describe()
    assert "balance_salary_card" in gaps
    assert "total_assets" not in gaps  # needs nothing the account must hold
    rig_file = tmp_path / "poor.yaml"
    rig_file.write_text(yaml.safe_dump(poor.model_dump(mode="json", exclude_none=True), allow_unicode=True))
    result = CliRunner().invoke(
        cli_app, ["check-pack", str(ROOT / "taskpacks" / "bank"), "--rig", str(rig_file), "--json"]
    )
    assert result.exit_code == 0, result.output
    listed = json.loads(result.output)[str(ROOT / "taskpacks" / "bank")]["uninstantiable"]
    assert {row["task"] for row in listed} == set(gaps)


def test_a_real_run_stops_before_the_first_episode_on_manual_preconditions(tmp_path: Path) -> None:
    pack = PACKS["train_ticketing"]
    manual = [t.id for t in pack.tasks if t.real.manual]
    assert "pay-unpaid-order" in manual
    with pytest.raises(ConfigError, match="--confirm-manual|manual preconditions") as exc:
        run_pack(
            RunConfig(
                pack=ROOT / "taskpacks" / "train_ticketing",
                out=tmp_path / "run",
                target="real",
                agent="golden",
                tasks="lookup-passenger-count,pay-unpaid-order",
                rig=ROOT / "rigs" / "example-lab.yaml",
                progress=False,
            )
        )
    assert "账户中有一笔未支付的广州到深圳订单" in exc.value.message
    assert not (tmp_path / "run" / "summary.json").exists()
    record = check_manual(pack, ["pay-unpaid-order"], virtual=False, confirmed=True)
    assert record["confirm_manual"] is True and record["manual_status"] == "confirmed"
    assert check_manual(pack, ["pay-unpaid-order"], virtual=True, confirmed=False)["manual_status"] == (
        "provisioned by virtual phones"
    )


def test_a_recorded_recipe_is_saved_with_a_backup_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    import shutil

    from realbench.recipes import save_recipe

    pack_dir = tmp_path / "bank"
    shutil.copytree(ROOT / "taskpacks" / "bank", pack_dir)
    recipe = {
        "setup": [{"do": "wait_for", "selector": {"text_contains": "总资产"}}],
        "golden": [{"answer": {"read": {"text_regex": "^\\d"}}}],
    }
    save_recipe(pack_dir, "total_assets", recipe)
    assert (pack_dir / "real.yaml.bak").exists()
    task = load_pack(pack_dir).task("total_assets")
    assert task.real.golden[0].answer is not None and task.real.setup[0].do == "wait_for"
    before = (pack_dir / "real.yaml").read_text(encoding="utf-8")
    with pytest.raises(PackError):
        save_recipe(pack_dir, "total_assets", {"setup": [{"do": "fly"}]})
    assert (pack_dir / "real.yaml").read_text(encoding="utf-8") == before
