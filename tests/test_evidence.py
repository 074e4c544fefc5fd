"""The evidence of real-side steps: its schema in packs, and `check-pack --evidence`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from realbench.cli import app
from realbench.errors import PackError
from realbench.evidence import Evidence, EvidenceLevel
from realbench.evidence_report import pack_evidence, real_steps
from realbench.recipes import WaitForStep, activity_matches
from realbench.taskpack import PlanStep, load_pack

REPO = Path(__file__).resolve().parents[1]
SCRIPT = {"level": "script", "source": "fs#26127499662"}


def toy_copy(tmp_path: Path, recipes: dict[str, object] | None = None, table: str | None = None) -> Path:
    pack_dir = tmp_path / "toy"
    pack_dir.mkdir()
    shutil.copy(REPO / "taskpacks" / "toy" / "pack.yaml", pack_dir / "pack.yaml")
    if recipes is not None:
        (pack_dir / "real.yaml").write_text(
            yaml.safe_dump({"app": "toy", "tasks": {"buy-item": recipes}}, allow_unicode=True),
            encoding="utf-8",
        )
    if table is not None:
        (pack_dir / "evidence.yaml").write_text(table, encoding="utf-8")
    return pack_dir


# --- schema -------------------------------------------------------------------------------------


def test_unknown_level_names_the_recipes_file_task_and_field(tmp_path: Path) -> None:
    pack_dir = toy_copy(
        tmp_path,
        {
            "setup": [
                {"do": "launch"},
                {"do": "tap", "selector": {"text": "商品列表"}, "evidence": {"level": "scrpt"}},
            ]
        },
    )
    with pytest.raises(PackError) as info:
        load_pack(pack_dir)
    assert info.value.path == str(pack_dir / "real.yaml")
    [problem] = info.value.problems
    assert problem.task_id == "buy-item"
    assert problem.field == "real.setup.1.evidence.level"
    assert "'script'" in problem.message


def test_unknown_level_in_the_pack_names_the_pack_file(tmp_path: Path) -> None:
    pack_dir = toy_copy(tmp_path)
    raw = (pack_dir / "pack.yaml").read_text(encoding="utf-8")
    raw = raw.replace(
        "boundary: [{resource_id: buy}]", "boundary: [{resource_id: buy, evidence: {level: hearsay}}]"
    )
    (pack_dir / "pack.yaml").write_text(raw, encoding="utf-8")
    with pytest.raises(PackError) as info:
        load_pack(pack_dir)
    assert info.value.path == str(pack_dir / "pack.yaml")
    [problem] = info.value.problems
    assert (problem.task_id, problem.field) == ("buy-item", "real.boundary.0.evidence.level")


def test_cited_levels_need_a_source(tmp_path: Path) -> None:
    pack_dir = toy_copy(tmp_path, {"golden": [{"tap": {"text": "商品列表"}, "evidence": {"level": "dump"}}]})
    with pytest.raises(PackError) as info:
        load_pack(pack_dir)
    assert info.value.problems[0].field == "real.golden.0.evidence"
    Evidence(level=EvidenceLevel.GUESS)  # a guess or a clone-only selector cites nothing
    Evidence(level=EvidenceLevel.CLONE)


def test_every_step_shape_carries_evidence(tmp_path: Path) -> None:
    pack_dir = toy_copy(
        tmp_path,
        {
            "setup": [
                {"do": "launch"},
                {"do": "wait_for", "activity": "H5Activity", "evidence": SCRIPT},
                {
                    "do": "tap",
                    "selector": {"text": "商品列表"},
                    "evidence": {"level": "clone"},
                    "expect": [{"selector": {"resource_id": "price"}, "evidence": {"level": "guess"}}],
                },
            ],
            "golden": [
                {"tap": {"text": "商品{item}"}, "evidence": SCRIPT},
                {"answer": {"read": {"text_pattern": "*次列车*"}, "regex": "^(\\w+)次"}, "evidence": SCRIPT},
            ],
        },
    )
    raw = (pack_dir / "pack.yaml").read_text(encoding="utf-8")
    raw = raw.replace(
        "boundary: [{resource_id: buy}]",
        "boundary: [{resource_id: buy, evidence: {level: web, source: 'fs#61014897233'}}]",
    ).replace(
        "checks: [{selector: {resource_id: price}, description: 商品页已打开}]",
        "checks: [{selector: {resource_id: price}, description: 商品页已打开, evidence: {level: rules, source: 'x/y:z'}}]",
    )
    (pack_dir / "pack.yaml").write_text(raw, encoding="utf-8")
    task = load_pack(pack_dir).tasks[0]
    steps = {s.where: s.level for s in real_steps(task)}
    assert steps == {
        "real.setup.1": EvidenceLevel.SCRIPT,
        "real.setup.2": EvidenceLevel.CLONE,
        "real.setup.2.expect.0": EvidenceLevel.GUESS,
        "real.golden.0": EvidenceLevel.SCRIPT,
        "real.golden.1": EvidenceLevel.SCRIPT,
        "real.checks.0": EvidenceLevel.RULES,
        "real.boundary.0": EvidenceLevel.WEB,
    }
    assert task.real.golden[1].kind == "answer"  # evidence is not a second action


def test_a_plan_step_still_takes_exactly_one_action() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        PlanStep.model_validate({"tap": {"text": "a"}, "key": "back", "evidence": SCRIPT})
    with pytest.raises(ValueError, match="exactly one"):
        PlanStep.model_validate({"evidence": SCRIPT})


def test_wait_for_takes_a_selector_or_an_activity() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        WaitForStep.model_validate({"do": "wait_for"})
    with pytest.raises(ValueError, match="exactly one"):
        WaitForStep.model_validate({"do": "wait_for", "activity": "A", "selector": {"text": "x"}})
    assert WaitForStep.model_validate({"do": "wait_for", "activity": "H5Activity"}).selectors() == []


@pytest.mark.parametrize(
    ("wanted", "current", "ok"),
    [
        ("H5Activity", "com.alipay.mobile.nebulacore.ui.H5Activity", True),
        ("com.alipay.mobile.nebulacore.ui.H5Activity", "com.alipay.mobile.nebulacore.ui.H5Activity", True),
        (".ui.activity.MainActivity", "com.MobileTicket.ui.activity.MainActivity", True),
        ("com.MobileTicket.ui.activity.MainActivity", ".ui.activity.MainActivity", True),
        ("MainActivity", "com.MobileTicket.ui.activity.MainActivity", True),
        ("H5Activity", "com.MobileTicket.ui.activity.MainActivity", False),
        ("Activity", "com.alipay.mobile.nebulacore.ui.H5Activity", False),  # the class name, not a suffix
        ("com.ccb.start.MainActivity", "com.MobileTicket.ui.activity.MainActivity", False),
        ("H5Activity", None, False),
    ],
)
def test_activity_matching(wanted: str, current: str | None, ok: bool) -> None:
    assert activity_matches(wanted, current, "com.MobileTicket") is ok


# --- check-pack --evidence ----------------------------------------------------------------------

TABLE = """
app: toy
package: com.example.toyshop
facts:
  query_button: {resource_id: ticket_home_btn_search, text: 查询车票, level: script, source: 'fs#1', wrong_names: [hp_query_button]}
  quiet: {text_contains: 静音车厢, level: web, source: 'fs#2'}
  h5: {activity: com.alipay.mobile.nebulacore.ui.H5Activity, level: script, source: 'fs#3'}
"""


def test_shares_guesses_and_contradictions(tmp_path: Path) -> None:
    pack_dir = toy_copy(
        tmp_path,
        {
            "setup": [
                {"do": "launch"},  # finds nothing: not a real step
                {"do": "wait_for", "selector": {"resource_id": "hp_query_button"}, "evidence": SCRIPT},
                {
                    "do": "tap",
                    "selector": {"text": "静音车厢"},
                    "evidence": SCRIPT,
                },  # the record has it at web
                {"do": "wait_for", "activity": "H5Activity", "evidence": SCRIPT},
                {
                    "do": "tap",
                    "selector": {"resource_id": "made_up"},
                    "evidence": SCRIPT,
                },  # an id no record names
                {"do": "wait_for", "activity": "MadeUpActivity", "evidence": SCRIPT},  # nor this activity
            ],
            "golden": [
                {"tap": {"text": "查询车票"}, "evidence": {"level": "guess", "source": "a hunch"}},
                {"key": "back"},  # finds nothing: not a real step
            ],
        },
        table=TABLE,
    )
    report = pack_evidence(load_pack(pack_dir))
    [task] = report.tasks
    # real steps: 5 setup + 1 golden + 1 check + 1 boundary = 8; script or better: the 5 setup ones
    assert task.steps == 8
    assert task.script_or_better == pytest.approx(5 / 8)
    assert task.guesses == ["real.golden.0"]
    joined = "\n".join(task.contradictions)
    assert "real.setup.1: `hp_query_button` is not the real query_button" in joined
    assert "ticket_home_btn_search" in joined and "fs#1" in joined
    assert "real.setup.2: claims [script] but the record has quiet only at [web]" in joined
    assert "real.setup.4: claims [script] for `made_up`" in joined
    assert "real.setup.5: claims [script] for activity `MadeUpActivity`" in joined
    assert len(task.contradictions) == 4  # H5Activity and the guessed text agree with the record
    assert report.contradiction_count == 4


def test_cli_json_shape_and_exit_code(tmp_path: Path) -> None:
    good = toy_copy(tmp_path, {"golden": [{"tap": {"text": "商品列表"}, "evidence": SCRIPT}]}, table=TABLE)
    result = CliRunner().invoke(app, ["check-pack", "--evidence", "--json", str(good)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    [pack] = data["packs"]
    assert pack["pack"] == "toy"
    # golden tap (script) + check + boundary (no evidence): 1 of 3
    assert pack["script_or_better"] == pytest.approx(1 / 3, abs=1e-4)
    [task] = pack["tasks"]
    assert {"task", "script_or_better", "guesses", "contradictions"} <= set(task)
    assert task["task"] == "buy-item" and task["guesses"] == [] and task["contradictions"] == []

    bad_dir = tmp_path / "bad"
    bad_dir.mkdir()
    bad = toy_copy(bad_dir, {"golden": [{"tap": {"resource_id": "hp_query_button"}}]}, table=TABLE)
    result = CliRunner().invoke(app, ["check-pack", "--evidence", str(bad)])
    assert result.exit_code == 1
    assert "hp_query_button" in result.output


def test_the_shipped_tables_load_and_name_the_known_wrong_ids() -> None:
    from realbench.evidence_report import load_table

    tables = {a: load_table(load_pack(REPO / "taskpacks" / a)) for a in ("train_ticketing", "bank")}
    train, bank = tables["train_ticketing"], tables["bank"]
    assert train is not None and bank is not None
    assert [k for k, _ in train.by_wrong_name("hp_query_button")] == ["query_button"]
    assert train.facts["query_button"].resource_id == "ticket_home_btn_search"
    for wrong, right in (
        ("qa_open_transfer_home", "main_home_smart_transfer"),
        ("payee_name", "et_cash_name"),
        ("btn_transfer_next", "btn_right1"),
    ):
        [(_, fact)] = bank.by_wrong_name(wrong)
        assert fact.resource_id == right


def test_the_run_report_shows_the_evidence_of_tasks_run_on_phones(tmp_path: Path) -> None:
    import pandas as pd

    from analysis.report import evidence_section

    pack_dir = toy_copy(
        tmp_path, {"golden": [{"tap": {"text": "商品列表"}, "evidence": SCRIPT}]}, table=TABLE
    )
    episodes = pd.DataFrame(
        [
            {"app": "toy", "task": "buy-item", "env": "real"},
            {"app": "toy", "task": "buy-item", "env": "clone"},
            {"app": "other", "task": "x", "env": "real"},  # no pack recorded for it: left out
        ]
    )
    section = evidence_section(episodes, {"toy": str(pack_dir)})
    assert section.empty is None
    [table] = section.tables
    assert "buy-item" in table and "33%" in table  # 1 of 3 real steps at script or better
    clone_only = evidence_section(episodes[episodes["env"] == "clone"], {"toy": str(pack_dir)})
    assert clone_only.empty


@pytest.mark.parametrize("app_name", ["train_ticketing", "bank"])
def test_the_shipped_packs_contradict_no_fact_of_record(app_name: str) -> None:
    report = pack_evidence(load_pack(REPO / "taskpacks" / app_name))
    assert report.has_table
    found = [c for t in report.tasks for c in t.contradictions]
    assert found == [], found[:10]
