"""Safety by effect: check-pack runs every golden plan on its clone and refuses a real-allowed task
that changes account state without a commit boundary before the change, or that would type
personal data a real person could hold."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from clones.base import get_clone
from clones.effects import effect_problems, task_effect
from clones.train_ticketing.idcard import id_problem
from realbench.personal_data import id_checksum_valid, personal_data
from realbench.taskpack import RealSide, Task, TaskPack, check_pack, load_pack

ROOT = Path(__file__).resolve().parent.parent
PACKS = {name: load_pack(ROOT / "taskpacks" / name) for name in ("train_ticketing", "bank")}


def _check(pack: TaskPack) -> list[str]:
    clone = get_clone(pack.clone)
    problems = check_pack(
        pack,
        has_clone=lambda n: True,
        has_verifier=lambda c, n: True,
        account_effect=lambda task: effect_problems(clone, task),
    )
    return [str(p) for p in problems]


def _with_real(task: Task, **update: object) -> Task:
    real = task.real.model_dump(exclude_unset=False)
    real.update(update)
    return task.model_copy(update={"real": RealSide.model_validate(real)})


@pytest.mark.parametrize("name", sorted(PACKS))
def test_both_packs_pass_safety_by_effect(name: str) -> None:
    start = time.process_time()
    assert _check(PACKS[name]) == []
    # the rule runs in the fast tier for both packs: a few CPU seconds each (wall time depends on load)
    assert time.process_time() - start < 20


def test_an_unguarded_account_change_is_refused_naming_task_and_state() -> None:
    pack = PACKS["train_ticketing"]
    task = _with_real(pack.task("passenger-delete"), boundary=[])
    problems = [str(p) for p in effect_problems(get_clone(pack.clone), task)]
    assert len(problems) == 1
    assert "passenger-delete" in problems[0] and "/user/passengers" in problems[0] and "step 4" in problems[0]


def test_a_denied_task_is_not_run_and_needs_a_reason() -> None:
    pack = PACKS["bank"]
    denied = pack.task("notify_txn_off")
    assert denied.real.allowed is False and denied.real.why
    assert effect_problems(get_clone(pack.clone), denied) == []
    allowed = _with_real(denied, allowed=True, why="")
    problems = [str(p) for p in effect_problems(get_clone(pack.clone), allowed)]
    assert problems and "/user/settings/notify/txn" in problems[0]
    with pytest.raises(ValidationError, match="must say why"):
        RealSide(allowed=False)


def test_the_boundary_step_guards_the_change_it_makes() -> None:
    pack = PACKS["train_ticketing"]
    effect = task_effect(get_clone(pack.clone), pack.task("passenger-delete"))
    assert effect.boundary_step == 4
    assert [c.path for c in effect.changes] == ["/user/passengers"] and not effect.unguarded


def test_search_history_kept_on_the_phone_is_not_account_state() -> None:
    pack = PACKS["train_ticketing"]
    clone = get_clone(pack.clone)
    effect = task_effect(clone, pack.task("lookup-train-count"))
    assert effect.changes == []
    assert "recent_searches" in clone.device_local_state


def test_a_checksum_valid_id_in_a_real_allowed_task_is_refused() -> None:
    pack = PACKS["train_ticketing"]
    task = _with_real(pack.task("passenger-add-student"), allowed=True, why="", boundary=[{"text": "保存"}])
    problems = [str(p) for p in check_pack(pack.model_copy(update={"tasks": [task]}))]
    assert any("320102200609150025" in p and "passenger-add-student" in p for p in problems), problems
    # the same number with a wrong check character names nobody, and the app refuses it
    assert id_problem("320102200609150026") is not None
    assert not id_checksum_valid("320102200609150026")
    fake = task.model_copy(
        update={"instruction": "添加学生乘车人孙悦，身份证号320102200609150026。", "golden": []}
    )
    assert [d for d in personal_data(fake) if d.kind == "id_number"] == []


def test_a_mobile_number_in_a_real_allowed_task_is_refused() -> None:
    pack = PACKS["bank"]
    task = _with_real(pack.task("topup_other_phone"), allowed=True, why="")
    problems = [str(p) for p in check_pack(pack.model_copy(update={"tasks": [task]}))]
    assert any("13912345678" in p and "topup_other_phone" in p for p in problems), problems


def test_every_real_allowed_task_types_no_personal_data() -> None:
    for pack in PACKS.values():
        for task in pack.tasks:
            if task.real.allowed:
                assert personal_data(task) == [], task.id


def test_a_real_run_plans_only_allowed_tasks_and_says_why_the_others_are_skipped() -> None:
    from realbench.real_allowed import split_real_allowed
    from realbench.runner import plan_episodes

    pack = PACKS["train_ticketing"]
    tasks = ["passenger-delete", "passenger-add", "settings-push-off", "reminder-delete"]
    keys = plan_episodes(pack, task_ids=tasks, repeats=2)
    runnable, skipped = split_real_allowed(pack, keys)
    assert [k.task for k in runnable] == ["passenger-delete", "passenger-delete"]
    assert [s.task for s in skipped] == ["passenger-add", "settings-push-off", "reminder-delete"]
    assert all(s.reason.startswith("not allowed on a real account: ") and len(s.reason) > 40 for s in skipped)


def test_the_check_pack_command_refuses_an_unguarded_task(tmp_path: Path) -> None:
    import json

    import yaml
    from typer.testing import CliRunner

    from realbench.cli import app

    raw = yaml.safe_load((ROOT / "taskpacks" / "train_ticketing" / "pack.yaml").read_text(encoding="utf-8"))
    raw["tasks"] = [t for t in raw["tasks"] if t["id"] in ("passenger-delete", "lookup-train-count")]
    raw["tasks"][-1]["real"].pop("boundary")
    (tmp_path / "pack.yaml").write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    result = CliRunner().invoke(app, ["check-pack", "--json", str(tmp_path / "pack.yaml")])
    assert result.exit_code == 2, result.output
    report = json.loads(result.stdout)
    problems = report[str(tmp_path / "pack.yaml")]["problems"]
    assert len(problems) == 1 and "passenger-delete" in problems[0] and "/user/passengers" in problems[0]
