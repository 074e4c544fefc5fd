"""Task parameters drawn from the live start state (``from_state`` parameters).

The pack must yield hundreds of distinct instances across seeds, every sampled instance must be
solvable by its golden plan and accepted by its verifier, and no instruction may state something
false about the world it runs in (a stop a train does not make, a seat class it does not have).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from clones.base import get_clone
from clones.contracts import state_param_problems
from clones.dom_plan import initial_state, plan_verdict, run_plan
from clones.train_ticketing import booking
from clones.train_ticketing.timetable import available, city_of, find_train, legs_between, stop_index
from realbench import state_params
from realbench.taskpack import StateParam, Task, load_pack
from tests.golden_play import golden_run
from tests.tt_support import CLONE, PACK, play, verdict

SEEDS = range(50)
SAMPLED_TASKS = [t for t in PACK.tasks if any(isinstance(s, StateParam) for s in t.params.values())]


def _instantiate(task: Task, seed: int):
    return task.instantiate(seed, task.clone.setup.clock.date())


def distinct_instances(seeds: range) -> tuple[int, int]:
    """(distinct task instructions, distinct task parameter sets) of the pack over `seeds`."""
    instructions: set[tuple[str, str]] = set()
    params: set[tuple[str, str]] = set()
    for task in PACK.tasks:
        for seed in seeds:
            inst = _instantiate(task, seed)
            instructions.add((task.id, inst.instruction))
            params.add((task.id, json.dumps(inst.params, sort_keys=True, ensure_ascii=False)))
    return len(instructions), len(params)


def test_the_pack_yields_hundreds_of_distinct_instances():
    instructions, params = distinct_instances(SEEDS)
    print(
        f"\n{len(PACK.tasks)} tasks x {len(SEEDS)} seeds: {instructions} distinct instructions, {params} distinct parameter sets"
    )
    assert len(SAMPLED_TASKS) >= 30
    assert instructions >= 1000
    assert params >= instructions


def test_instantiation_is_deterministic_per_seed_and_varies_across_seeds():
    for task in SAMPLED_TASKS:
        assert _instantiate(task, 7).params == _instantiate(task, 7).params
        assert len({_instantiate(task, s).instruction for s in range(12)}) >= 3, task.id


# --- every sampled fact holds in the world ---------------------------------------------------------


def _world_problems(task: Task, params: dict[str, Any]) -> list[str]:
    state = state_params.start_state("train_ticketing", task.clone.setup)
    world = state["world"]
    problems: list[str] = []
    for name, spec in task.params.items():
        if not isinstance(spec, StateParam):
            continue
        value = params[name]
        if spec.sampler == "trip":
            legs = [
                leg
                for leg in legs_between(world, value["from"], value["to"], value["date_date"])
                if leg.no == value["train"]
            ]
            if not legs:
                problems.append(f"{value['train']} does not run {value['from']}→{value['to']}")
                continue
            leg = legs[0]
            if (leg.from_station, leg.to_station) != (value["from_station"], value["to_station"]):
                problems.append(
                    f"{value['train']} does not run {value['from_station']}→{value['to_station']}"
                )
            if value["seat"] not in leg.train["classes"]:
                problems.append(f"{value['train']} has no {value['seat_label']}")
            min_seats = int(spec.args.get("min_seats", 1))
            left = available(state, leg.train, leg.day)[value["seat"]]
            if spec.args.get("sold_out"):
                if left != 0:
                    problems.append(
                        f"{value['train']} still has {value['seat_label']} (the task says sold out)"
                    )
            elif "seat" in spec.args and left < min_seats:
                problems.append(f"{value['train']} has fewer than {min_seats} {value['seat_label']} left")
            if booking.departure_at(leg.day, leg.dep_min) <= booking.now_of(state):
                problems.append(f"{value['train']} has left already")
            if (types := spec.args.get("types")) and leg.type not in types:
                problems.append(f"{value['train']} is not of types {types}")
            if city_of(value["from_station"]) != value["from"] or city_of(value["to_station"]) != value["to"]:
                problems.append("the trip's stations are not in its cities")
        elif spec.sampler == "train_stop":
            train = find_train(world, value["train"])
            if train is None:
                problems.append(f"no train {value['train']}")
                continue
            i = stop_index(train, value["station"])
            if i is None:
                problems.append(f"{value['train']} does not stop at {value['station']}")
            elif train["stops"][i]["dep"] is None and spec.args.get("stop", "intermediate") == "intermediate":
                problems.append(f"{value['train']} does not depart from {value['station']}")
            if train["stops"][-1]["station"] != value["terminal"]:
                problems.append(f"{value['train']} does not end at {value['terminal']}")
        elif spec.sampler == "route":
            if not legs_between(world, value["from"], value["to"], task.clone.setup.clock.date().isoformat()):
                problems.append(f"no train runs {value['from']}→{value['to']}")
        elif spec.sampler == "order":
            order = next(
                (o for o in state["user"]["orders"] if f"{o['from']} → {o['to']}" == value["label"]), None
            )
            train = find_train(world, value["train"])
            if order is None or train is None or order["train"] != value["train"]:
                problems.append(f"no order {value['label']} on {value['train']}")
                continue
            names = [s["station"] for s in train["stops"]]
            if (
                value["stop"]
                and value["stop"] not in names[names.index(order["from"]) + 1 : names.index(order["to"])]
            ):
                problems.append(f"{value['train']} does not stop at {value['stop']} before {order['to']}")
        elif spec.sampler == "station":
            if value["name"] not in {s["name"] for s in world["stations"]}:
                problems.append(f"no station {value['name']}")
        elif spec.sampler == "passenger" and value["name"] not in {
            p["name"] for p in state["user"]["passengers"]
        }:
            problems.append(f"the account has no passenger {value['name']}")
    return problems


@pytest.mark.parametrize("task_id", [t.id for t in SAMPLED_TASKS])
def test_no_instruction_states_something_false_about_the_world(task_id):
    task = PACK.task(task_id)
    for seed in SEEDS:
        inst = _instantiate(task, seed)
        assert _world_problems(task, inst.params) == [], (seed, inst.instruction)


def test_the_world_check_catches_a_stop_the_train_does_not_make():
    task = PACK.task("lookup-stop-departure")
    params = _instantiate(task, 0).params
    train = find_train(
        state_params.start_state("train_ticketing", task.clone.setup)["world"], params["stop"]["train"]
    )
    assert train is not None
    stops = {s["station"] for s in train["stops"]}
    elsewhere = next(
        s["name"]
        for s in state_params.start_state("train_ticketing", task.clone.setup)["world"]["stations"]
        if s["name"] not in stops
    )
    wrong = {**params, "stop": {**params["stop"], "station": elsewhere}}
    assert any("does not stop at" in p for p in _world_problems(task, wrong))


# --- sampled instances are solvable and verified (property-style, seeded) ---------------------------


@pytest.mark.parametrize("task_id", [t.id for t in SAMPLED_TASKS])
def test_golden_plan_and_verifier_agree_on_sampled_instances(task_id):
    task = PACK.task(task_id)
    rng = np.random.default_rng(20261201)
    for seed in rng.choice(10_000, size=5, replace=False):
        inst = _instantiate(task, int(seed))
        before, run = play(inst)
        v = verdict(inst, before, run.after, run.answer)
        assert v.success, (inst.instruction, v.reason, run.refusals)
        assert CLONE.side_effects(task.clone.side_effect_checks, before, run.after, inst.verifier_args) == []
        assert CLONE.unexpected_changes(task.clone.verifier.name, before, run.after) == []
        if task.real.boundary:
            assert run.boundary


# --- contracts and failures ------------------------------------------------------------------------


def _with_param(task_id: str, **spec: Any) -> Task:
    task = PACK.task(task_id)
    raw = task.model_dump(mode="json", exclude_none=True)
    raw["params"]["trip"] = {"type": "from_state", **spec}
    return Task.model_validate(raw)


def test_a_sampler_that_finds_nothing_fails_clearly():
    task = _with_param(
        "lookup-train-count", sampler="trip", args={"dates": ["tomorrow"], "cities": ["北京"], "types": ["G"]}
    )
    with pytest.raises(state_params.NothingToSample) as err:
        _instantiate(task, 0)
    assert "lookup-train-count" in err.value.message and "'trip'" in err.value.message
    problems = state_param_problems(get_clone("train_ticketing"), task)
    assert [p.field for p in problems] == ["params"]


def test_check_pack_refuses_unknown_samplers_bad_arguments_and_unknown_fields():
    clone = get_clone("train_ticketing")
    unknown = _with_param("lookup-train-count", sampler="no_such_sampler")
    assert [p.field for p in state_param_problems(clone, unknown)] == ["params.trip.sampler"]
    bad_args = _with_param(
        "lookup-train-count", sampler="trip", args={"dates": ["tomorrow"], "seat": "first"}
    )
    assert [p.field for p in state_param_problems(clone, bad_args)] == ["params.trip.args"]
    no_dates = _with_param("lookup-train-count", sampler="trip", args={"datez": ["tomorrow"]})
    assert [p.field for p in state_param_problems(clone, no_dates)] == ["params.trip.args"]
    task = PACK.task("lookup-train-count")
    raw = task.model_dump(mode="json", exclude_none=True)
    raw["instruction"] = "{trip.platform}站台在哪里？"
    problems = state_param_problems(clone, Task.model_validate(raw))
    assert [p.field for p in problems] == ["params.trip"] and "platform" in problems[0].message


def test_an_undeclared_parameter_head_is_refused_in_the_instruction():
    raw = PACK.task("lookup-train-count").model_dump(mode="json", exclude_none=True)
    raw["instruction"] = "{journey.from}到哪里？"
    with pytest.raises(ValueError, match="journey"):
        Task.model_validate(raw)


def test_a_chosen_value_replaces_the_sampled_one():
    task = PACK.task("lookup-station-sale-time")
    inst = task.instantiate(0, task.clone.setup.clock.date(), {"station": {"name": "杭州东", "city": "杭州"}})
    assert inst.instruction.startswith("杭州东站")


@pytest.mark.parametrize("task_id", [t.id for t in SAMPLED_TASKS])
def test_verifier_rejects_wrong_end_states_of_sampled_instances(task_id):
    """The clone's plausible wrong outcomes, built from each sampled instance, still fail."""
    task = PACK.task(task_id)
    contract = CLONE.verifiers[task.clone.verifier.name]
    assert contract.wrong_end_states is not None
    for seed in (3, 17, 41):
        inst = _instantiate(task, seed)
        run = golden_run(CLONE, inst)
        assert CLONE.verify_instance(inst, run.before, run.after, run.answer).success, inst.instruction
        for w in contract.wrong_end_states(run):
            if w.verifier_alone:
                v = CLONE.verify(contract.name, w.before, w.after, inst.verifier_args, w.answer, task.answer)
            else:
                v = CLONE.verify_instance(inst, w.before, w.after, w.answer)
            assert not v.success, (seed, inst.instruction, w.label, v.reason)


# --- the bank pack: a payee on the list, an amount the default account can send ---------------------

BANK_PACK = load_pack("taskpacks/bank")
BANK = get_clone("bank")
BANK_SAMPLED = [t for t in BANK_PACK.tasks if any(isinstance(s, StateParam) for s in t.params.values())]


@pytest.mark.parametrize("task_id", [t.id for t in BANK_SAMPLED])
def test_bank_sampled_instances_name_real_payees_and_sendable_amounts(task_id):
    task = BANK_PACK.task(task_id)
    for seed in range(8):
        inst = _instantiate(task, seed)
        state = initial_state(BANK, inst)
        if "payee" in task.params:
            assert inst.params["payee"] in {p["name"] for p in state["user"]["payees"]}, inst.instruction
        if "amount" in task.params:
            account = next(a for a in state["user"]["accounts"] if a.get("default"))
            assert 0 < inst.params["amount"] * 100 <= account["balance_fen"], inst.instruction
        run = run_plan(BANK, state, inst)
        v, effects = plan_verdict(BANK, inst, run)
        assert v.success and effects == [], (seed, inst.instruction, v.reason, effects)


def test_a_field_parameter_is_a_plain_value_and_dotted_use_is_refused():
    task = BANK_PACK.task("transfer_saved_payee")
    inst = _instantiate(task, 0)
    assert isinstance(inst.params["payee"], str) and isinstance(inst.params["amount"], int)
    raw = task.model_dump(mode="json", exclude_none=True)
    raw["instruction"] = "给{payee.name}转账{amount}元。"
    problems = state_param_problems(BANK, Task.model_validate(raw))
    assert [p.field for p in problems] == ["params.payee"]
