"""Every task of every pack against its verifier's contract: the arguments validate, and the
verifier rejects doing nothing and each wrong end state registered beside it. A new task gets
these checks without a line of test code. Also: `realbench check-pack` refuses malformed tasks,
naming the task and the field, without a traceback."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from clones.base import clone_names, get_clone
from clones.contracts import VerifierArgs, contract_problems, pack_checks
from realbench.cli import app
from realbench.taskpack import Task, check_pack, load_pack, parse_pack
from tests.golden_play import golden_run, instance_of

REPO = Path(__file__).resolve().parents[1]
PACKS = {p.parent.name: load_pack(p) for p in sorted(REPO.glob("taskpacks/*/pack.yaml"))}
CASES = [(app_name, t.id) for app_name, pack in PACKS.items() for t in pack.tasks]


def _task(app_name: str, task_id: str) -> tuple[Any, Task]:
    pack = PACKS[app_name]
    return get_clone(pack.clone), pack.task(task_id)


def test_every_pack_passes_its_contracts() -> None:
    for name, pack in PACKS.items():
        assert check_pack(pack, **pack_checks()) == [], name


def test_every_registered_verifier_declares_args_and_wrong_end_states() -> None:
    for name in clone_names():
        for contract in get_clone(name).verifiers.values():
            assert issubclass(contract.args, VerifierArgs), (name, contract.name)
            assert contract.wrong_end_states is not None, (
                f"{name}.{contract.name} registers no wrong end states"
            )


@pytest.mark.parametrize(("app_name", "task_id"), CASES)
def test_verifier_rejects_doing_nothing_and_wrong_end_states(app_name: str, task_id: str) -> None:
    clone, task = _task(app_name, task_id)
    inst = instance_of(task)
    run = golden_run(clone, inst)
    assert clone.verify_instance(inst, run.before, run.after, run.answer).success, "the golden run fails"
    start = clone.build_state(task.clone.setup, inst.params)
    assert not clone.verify_instance(inst, start, copy.deepcopy(start), None).success, "doing nothing passed"
    contract = clone.verifiers[task.clone.verifier.name]
    assert contract.wrong_end_states is not None
    wrong = contract.wrong_end_states(run)
    assert wrong, f"no wrong end state is produced for {contract.name}"
    for w in wrong:
        if w.verifier_alone:
            v = clone.verify(contract.name, w.before, w.after, inst.verifier_args, w.answer, task.answer)
            assert not v.success, f"{w.label}: {v.reason}"
            assert v.progress < 1.0 or v.side_effects, w.label
        else:
            v = clone.verify_instance(inst, w.before, w.after, w.answer)
            assert not v.success, f"{w.label}: {v.reason}"


# --- check-pack refuses malformed tasks ------------------------------------------------------------

BANK_RAW = yaml.safe_load((REPO / "taskpacks" / "bank" / "pack.yaml").read_text(encoding="utf-8"))
TT_RAW = yaml.safe_load((REPO / "taskpacks" / "train_ticketing" / "pack.yaml").read_text(encoding="utf-8"))


def _raw_task(raw: dict[str, Any], task_id: str) -> dict[str, Any]:
    return next(t for t in raw["tasks"] if t["id"] == task_id)


def _variant(raw: dict[str, Any], task_id: str, edit: Any) -> dict[str, Any]:
    out = copy.deepcopy(raw)
    edit(_raw_task(out, task_id))
    return out


def _set(path: list[str], value: Any) -> Any:
    def edit(task: dict[str, Any]) -> None:
        node = task
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value

    return edit


def _drop(path: list[str]) -> Any:
    def edit(task: dict[str, Any]) -> None:
        node = task
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]

    return edit


MALFORMED = {
    # a misspelt argument would silently fall back to a default
    "misspelt arg": (
        BANK_RAW,
        "balance_main_card",
        _set(["clone", "verifier", "args", "acc_tial"], "5678"),
        "clone.verifier.args.acc_tial",
        "has no argument 'acc_tial'",
    ),
    "unknown query": (
        BANK_RAW,
        "balance_main_card",
        _set(["clone", "verifier", "args", "query"], "balanse"),
        "clone.verifier.args.query",
        "balanse",
    ),
    "wrong type": (
        BANK_RAW,
        "hide_balance_in_settings",
        _set(["clone", "verifier", "args", "value"], "no"),
        "clone.verifier.args.value",
        "valid boolean",
    ),
    "missing required arg": (
        BANK_RAW,
        "hide_balance_in_settings",
        _drop(["clone", "verifier", "args", "value"]),
        "clone.verifier.args.value",
        "needs the argument 'value'",
    ),
    "answer verifier, no answer": (
        BANK_RAW,
        "balance_main_card",
        _drop(["answer"]),
        "answer",
        "declares no `answer`",
    ),
    "unknown scenario": (
        TT_RAW,
        "lookup-order-seat",
        _set(["clone", "setup", "data", "scenario"], "with_order"),
        "clone.setup.data.scenario",
        "unknown scenario 'with_order'",
    ),
    "unknown setup data": (
        TT_RAW,
        "lookup-order-seat",
        _set(["clone", "setup", "data", "scenarios"], "with_orders"),
        "clone.setup.data.scenarios",
        "Extra inputs",
    ),
    "unknown setup route": (
        BANK_RAW,
        "hide_balance_in_settings",
        _set(["clone", "setup", "route"], "no_such_screen"),
        "clone.setup.route",
        "no screen 'no_such_screen'",
    ),
    "misspelt train-ticketing arg": (
        TT_RAW,
        "lookup-order-seat",
        _set(["clone", "verifier", "args", "pasenger"], "王芳"),
        "clone.verifier.args.pasenger",
        "has no argument 'pasenger'",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_contract_problems_name_the_task_and_field(case: str) -> None:
    raw, task_id, edit, field, message = MALFORMED[case]
    pack = parse_pack(_variant(raw, task_id, edit))
    task = pack.task(task_id)
    problems = contract_problems(get_clone(pack.clone), pack, task)
    assert [(p.task_id, p.field) for p in problems] == [(task_id, field)], problems
    assert message in problems[0].message


@pytest.mark.parametrize("case", ["misspelt arg", "answer verifier, no answer", "unknown scenario"])
def test_check_pack_command_refuses_malformed_variants(case: str, tmp_path: Path) -> None:
    raw, task_id, edit, field, message = MALFORMED[case]
    variant = _variant(raw, task_id, edit)
    # The broken task beside one sound task: the command must name the one, and the whole pack's
    # contracts (seconds per pack, repeated per case) are test_every_pack_passes_its_contracts'.
    sound = next(t for t in variant["tasks"] if t["id"] != task_id)
    variant["tasks"] = [sound, _raw_task(variant, task_id)]
    path = tmp_path / "pack.yaml"
    path.write_text(yaml.safe_dump(variant, allow_unicode=True), encoding="utf-8")
    result = CliRunner().invoke(app, ["check-pack", str(path)])
    assert result.exit_code == 2, result.output
    assert f"task '{task_id}', field '{field}'" in result.output.replace("\n", " ") or (
        task_id in result.output and field in result.output
    )
    assert "Traceback" not in result.output
