"""The generic side-effect check: an unanticipated change fails a task that every named check
passes; the golden plans change only what their verifiers expect (for every task of both packs)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from clones.base import get_clone
from clones.dom_plan import initial_state, instantiate, run_plan
from clones.expected_changes import path_allowed, unexpected_changes
from realbench.taskpack import load_pack

ROOT = Path(__file__).resolve().parents[1]


def test_globs_over_state_paths() -> None:
    assert path_allowed("/user/orders", ["/user/orders/**"])
    assert path_allowed("/user/orders/3/tickets/0/status", ["/user/orders/**"])
    assert path_allowed("/user/orders/3/status", ["/user/orders/*/status"])
    assert not path_allowed("/user/orders/3/tickets/0/status", ["/user/orders/*/status"])
    assert not path_allowed("/user/ordersx", ["/user/orders/**"])
    changes = [
        {"op": "replace", "path": "/ui/route"},
        {"op": "replace", "path": "/user/seq"},
        {"op": "add", "path": "/user/recent_searches/0"},
        {"op": "replace", "path": "/user/settings/push"},
    ]
    assert unexpected_changes(changes, [], device_local=["recent_searches"]) == [
        "unexpected change: replace /user/settings/push"
    ]


@pytest.mark.parametrize(
    ("pack", "task_id", "mutate", "path"),
    [
        (
            "train_ticketing",
            "book-named-train-first-class",
            lambda s: s["user"]["messages"][0].update(read=not s["user"]["messages"][0]["read"]),
            "/user/messages/0/read",
        ),
        (
            "bank",
            "transfer_saved_payee",
            lambda s: s["user"]["settings"].update(hide_balance=not s["user"]["settings"]["hide_balance"]),
            "/user/settings/hide_balance",
        ),
    ],
)
def test_an_unanticipated_change_fails_the_task(pack: str, task_id: str, mutate, path: str) -> None:
    task_pack = load_pack(ROOT / "taskpacks" / pack)
    clone = get_clone(task_pack.clone)
    task = task_pack.task(task_id)
    instance = instantiate(task, 0)
    run = run_plan(clone, initial_state(clone, instance), instance)
    assert clone.verify_instance(instance, run.before, run.after, run.answer).success
    after = copy.deepcopy(run.after)
    mutate(after)
    # the task's own named checks do not look there ...
    assert clone.side_effects(task.clone.side_effect_checks, run.before, after, instance.verifier_args) == []
    # ... the generic check does
    verdict = clone.verify_instance(instance, run.before, after, run.answer)
    assert not verdict.success
    assert verdict.side_effects == [f"unexpected change: replace {path}"]


def test_a_clone_without_an_allow_list_has_no_generic_check() -> None:
    toy = get_clone("toy_shop")
    assert toy.expected_changes is None
    assert toy.unexpected_changes("anything", {"user": {"a": 1}}, {"user": {"a": 2}}) == []


@pytest.mark.parametrize("pack", ["train_ticketing", "bank"])
def test_every_golden_plan_changes_only_what_its_verifier_expects(pack: str) -> None:
    task_pack = load_pack(ROOT / "taskpacks" / pack)
    clone = get_clone(task_pack.clone)
    found = {}
    for task in task_pack.tasks:
        instance = instantiate(task, 0)
        run = run_plan(clone, initial_state(clone, instance), instance)
        extra = clone.unexpected_changes(task.clone.verifier.name, run.before, run.after)
        if extra:
            found[task.id] = extra
    assert found == {}
