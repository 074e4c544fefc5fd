"""The real recipes of the two 中转 tasks reach their end on the clone, browser-free.

Both walk the 中转 tab into 中转方案详情 and on from there, screens the real app renders as H5 pages
(REAL_APPS.md 6): the detail names each leg by the row's one accessibility Button (`G 1次列车…`), and
the seat screen a leg's 预订第一程 opens has a `预订` Button per seat row, 二等 first, as the list's
expanded card does. The recipes select by exactly those, so the clone has to show them.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from clones.base import get_clone
from clones.dom_plan import DomPlanRunner, PlanRun, plan_verdict, run_plan
from devices.rig import load_rig
from realbench.taskpack import TaskInstance, instantiate_from_fixture, load_pack

ROOT = Path(__file__).resolve().parents[1]
PACK = load_pack(ROOT / "taskpacks" / "train_ticketing")
CLONE = get_clone(PACK.clone)
FIXTURE = next(
    a.fixture for a in load_rig(ROOT / "rigs" / "virtual.yaml").accounts if a.app == PACK.real_app.package
)


def _instance(task_id: str) -> TaskInstance:
    task = PACK.task(task_id)
    return instantiate_from_fixture(task, 0, task.clone.setup.clock.date(), FIXTURE)


def _play_real(inst: TaskInstance) -> PlanRun:
    """The real golden recipe on the clone's served markup, until it answers or taps the commit."""
    state = CLONE.build_state(inst.task.clone.setup, inst.params)
    runner = DomPlanRunner(CLONE, copy.deepcopy(state), inst.params, inst.boundary())
    for step in inst.task.real.golden:
        runner.step(step)  # its answer read folds letter-spaced train numbers, as golden.py does
        if runner.finished:
            break
    return runner.run


@pytest.mark.parametrize("task_id", ["lookup-transfer-second-train", "book-transfer-first-leg"])
def test_the_real_recipe_passes_the_verifier_on_the_clone(task_id: str) -> None:
    inst = _instance(task_id)
    real = _play_real(inst)
    verdict, effects = plan_verdict(CLONE, inst, real)
    assert verdict.success, verdict.reason
    assert effects == []
    clone_plan = run_plan(CLONE, CLONE.build_state(inst.task.clone.setup, inst.params), inst)
    assert real.answer == clone_plan.answer  # the real recipe reads what the clone's plan reads
    if inst.task.real.boundary:
        assert real.boundary  # stopped by the commit tap, 提交订单


def test_the_transfer_detail_names_each_leg_by_its_row_string_and_seats_book_by_button() -> None:
    inst = _instance("book-transfer-first-leg")
    runner = DomPlanRunner(CLONE, CLONE.build_state(inst.task.clone.setup, inst.params), inst.params)
    golden = list(inst.task.real.golden)
    book_leg = next(
        i for i, s in enumerate(golden) if s.tap is not None and s.tap.resource_id == "book_leg_1"
    )
    for step in golden[:book_leg]:
        runner.step(step)
    assert runner.route == "transfer_detail"
    rows = [d.node.text for d in runner.nodes if "次列车" in d.node.text]
    assert len(rows) == 2 and all(d.startswith(("G ", "D ", "K ", "Z ", "T ", "C ")) for d in rows), rows
    runner.step(golden[book_leg])
    assert runner.route == "train_seats"
    books = [d for d in runner.nodes if d.node.text == "预订"]
    assert books and all(d.node.class_name == "android.widget.Button" for d in books)
    assert books[0].node.short_id == "book_edz"  # 二等 first, as on the list's expanded card
