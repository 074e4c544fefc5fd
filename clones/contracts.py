"""Verifier contracts: what each verifier reads, checked before a pack ever runs.

A verifier is registered with its contract, beside its code:

    VERIFIERS = VerifierSet()

    class BoughtArgs(VerifierArgs):
        item: int

    @VERIFIERS.verifier("bought", args=BoughtArgs)
    def bought(before, after, params, answer, spec) -> Verdict: ...

- ``args``: a pydantic model of the verifier's arguments (the task's ``clone.verifier.args``, plus
  the task parameters of the same name). Unknown or misspelt arguments, wrong types and missing
  required arguments are refused by ``check-pack``, naming the task and the field.
- ``answers``: the answer types the verifier grades; empty when it reads no answer. A verifier that
  reads an answer refuses tasks without an ``answer`` spec, and receives the task's ``AnswerSpec``.
- ``wrong_end_states``: plausible wrong outcomes the verifier must reject (registered beside it
  with ``@VERIFIERS.wrong_end_states(name, ...)``); the test suite runs them for every task.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from realbench import state_params
from realbench.actions import TerminateStatus
from realbench.errors import ConfigError, PackProblem
from realbench.outcome import Verdict
from realbench.taskpack import (
    AnswerSpec,
    AnswerType,
    PlanStep,
    StateParam,
    Task,
    TaskInstance,
    TaskPack,
    strings_in,
)
from realbench.templating import placeholders, render_value

if TYPE_CHECKING:
    from clones.base import Clone

State = dict[str, Any]
Verifier = Callable[[State, State, dict[str, Any], str | None, AnswerSpec], Verdict]
SideEffectCheck = Callable[[State, State, dict[str, Any]], list[str]]


class VerifierArgs(BaseModel):
    """Base of every verifier's argument model: unknown arguments are refused."""

    model_config = ConfigDict(extra="forbid")


class NoArgs(VerifierArgs):
    """A verifier that takes no arguments."""


@dataclass(frozen=True)
class WrongEnd:
    """A plausible wrong outcome of a task. The verifier alone must fail it, or, where
    `verifier_alone` is False (an extra order, say), the verifier with the task's side-effect checks."""

    label: str
    before: State
    after: State
    answer: str | None
    verifier_alone: bool = True


@dataclass(frozen=True)
class GoldenRun:
    """A task instance's golden episode on the clone, and a way to play edited plans of it.

    ``play(instance, state)`` runs the instance's golden plan (its task may be an edited copy) from
    its start state, or from ``state``, and returns ``(before, after, answer)``.
    """

    clone: Clone
    instance: TaskInstance
    before: State
    after: State
    answer: str | None
    play: Callable[[TaskInstance, State | None], tuple[State, State, str | None]]

    def start(self) -> State:
        """A fresh start state of the instance."""
        return self.clone.build_state(self.instance.task.clone.setup, self.instance.params)


WrongEndStates = Callable[[GoldenRun], list[WrongEnd]]


def stopped_one_step_short(run: GoldenRun) -> list[WrongEnd]:
    """The golden plan without its last effective step: the agent stopped one step short."""
    task = run.instance.task
    steps = list(task.golden)
    last = max(i for i, s in enumerate(steps) if s.terminate is None)
    short = task.model_copy(update={"golden": [*steps[:last], PlanStep(terminate=TerminateStatus.SUCCESS)]})
    before, after, answer = run.play(run.instance.model_copy(update={"task": short}), None)
    return [WrongEnd("stopped one step short", before, after, answer)]


@dataclass(frozen=True)
class VerifierContract:
    """A registered verifier and what it promises (see the module docstring)."""

    name: str
    check: Verifier
    args: type[VerifierArgs] = NoArgs
    answers: frozenset[AnswerType] = frozenset()
    wrong_end_states: WrongEndStates | None = None

    @property
    def reads_answer(self) -> bool:
        return bool(self.answers)

    def __call__(
        self, before: State, after: State, params: dict[str, Any], answer: str | None, spec: AnswerSpec
    ) -> Verdict:
        return self.check(before, after, params, answer, spec)


class VerifierSet(dict[str, VerifierContract]):
    """A clone's verifiers by name, each with its contract."""

    def verifier(
        self,
        name: str,
        *,
        args: type[VerifierArgs] = NoArgs,
        answers: Iterable[AnswerType] = (),
    ) -> Callable[[Verifier], Verifier]:
        def deco(fn: Verifier) -> Verifier:
            previous = self.get(name)
            wrong = previous.wrong_end_states if previous is not None else None
            self[name] = VerifierContract(name, fn, args, frozenset(answers), wrong)
            return fn

        return deco

    def wrong_end_states(self, *names: str) -> Callable[[WrongEndStates], WrongEndStates]:
        """Registers a generator of wrong end states for the named (already registered) verifiers."""

        def deco(fn: WrongEndStates) -> WrongEndStates:
            for name in names:
                self[name] = replace(self[name], wrong_end_states=fn)
            return fn

        return deco


class SideEffectCheckSet(dict[str, SideEffectCheck]):
    """A clone's side-effect checks by name: ``(before, after, params) -> [what changed that
    should not have]``, registered like the verifiers."""

    def check(self, name: str) -> Callable[[SideEffectCheck], SideEffectCheck]:
        def deco(fn: SideEffectCheck) -> SideEffectCheck:
            self[name] = fn
            return fn

        return deco


# --- checking a pack against the contracts ------------------------------------------------------


def _field(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc) or "(args)"


def args_problems(contract: VerifierContract, task: Task) -> list[PackProblem]:
    """The task's verifier arguments (rendered for a sample instance) checked against the model."""
    model = contract.args
    instance = task.instantiate(0, task.clone.setup.clock.date())
    try:
        rendered = render_value(task.clone.verifier.args, instance.params)
    except ConfigError:
        return []  # an undeclared placeholder: the schema check reports it
    values = {k: v for k, v in instance.params.items() if k in model.model_fields}
    values.update(rendered)
    try:
        model.model_validate(values)
    except ValidationError as exc:
        problems = []
        known = ", ".join(model.model_fields) or "none"
        for err in exc.errors():
            where = f"clone.verifier.args.{_field(err['loc'])}"
            if err["type"] == "extra_forbidden":
                msg = f"verifier {contract.name!r} has no argument {err['loc'][0]!r} (it takes: {known})"
            elif err["type"] == "missing":
                msg = f"verifier {contract.name!r} needs the argument {err['loc'][0]!r}"
            else:
                msg = f"{err['msg']} (got {err.get('input')!r})"
            problems.append(PackProblem(task.id, where, msg))
        return problems
    return []


def answer_problems(contract: VerifierContract, task: Task) -> list[PackProblem]:
    if not contract.reads_answer:
        return []
    kinds = ", ".join(sorted(a.value for a in contract.answers))
    if task.answer.type is AnswerType.NONE:
        return [
            PackProblem(
                task.id,
                "answer",
                f"verifier {contract.name!r} grades an answer ({kinds}) but the task declares no `answer`",
            )
        ]
    if task.answer.type not in contract.answers:
        return [
            PackProblem(
                task.id,
                "answer.type",
                f"verifier {contract.name!r} grades answers of type {kinds}, not {task.answer.type.value!r}",
            )
        ]
    return []


def setup_problems(clone: Clone, task: Task) -> list[PackProblem]:
    setup = task.clone.setup
    problems: list[PackProblem] = []
    model = clone.setup_data
    if model is not None:
        try:
            model.model_validate(setup.data)
        except ValidationError as exc:
            for err in exc.errors():
                problems.append(
                    PackProblem(
                        task.id,
                        f"clone.setup.data.{_field(err['loc'])}",
                        f"{err['msg']} (got {err.get('input')!r})",
                    )
                )
    routes = clone.routes()
    if setup.route is not None and routes and setup.route not in routes:
        problems.append(
            PackProblem(task.id, "clone.setup.route", f"clone {clone.name!r} has no screen {setup.route!r}")
        )
    return problems


def _template_strings(task: Task) -> Iterable[str]:
    yield task.instruction
    yield task.judge.rubric
    for step in [*task.golden, *task.real.golden]:
        yield from step.strings()
    yield from strings_in(task.clone.verifier.args)
    for check in task.real.checks:
        yield from (s for s in check.selector.model_dump().values() if isinstance(s, str))


def state_param_problems(clone: Clone, task: Task) -> list[PackProblem]:
    """``from_state`` parameters against their samplers' contracts: the sampler is the clone's,
    its arguments fit its model, every ``{param.field}`` is a field it returns, and it finds
    something to draw in the task's start state."""
    problems: list[PackProblem] = []
    used = {p for s in _template_strings(task) for p in placeholders(s)}
    for name, spec in task.params.items():
        if not isinstance(spec, StateParam):
            continue
        where = f"params.{name}"
        if spec.sampler not in state_params.sampler_names(clone.name):
            known = ", ".join(state_params.sampler_names(clone.name)) or "none"
            problems.append(
                PackProblem(
                    task.id,
                    f"{where}.sampler",
                    f"clone {clone.name!r} has no state sampler {spec.sampler!r} (known: {known})",
                )
            )
            continue
        sampler = state_params.find_sampler(spec.sampler)
        try:
            state_params.parse_args(sampler, spec.args)
        except ConfigError as exc:
            problems.append(PackProblem(task.id, f"{where}.args", exc.message))
            continue
        if spec.field is not None and spec.field not in sampler.fields:
            problems.append(
                PackProblem(
                    task.id,
                    f"{where}.field",
                    f"sampler {spec.sampler!r} returns no field {spec.field!r} (it returns: {', '.join(sorted(sampler.fields))})",
                )
            )
            continue
        for p in sorted(used):
            head, _, field = p.partition(".")
            if head == name and spec.field is not None and field:
                problems.append(
                    PackProblem(
                        task.id,
                        where,
                        f"{{{p}}}: the parameter keeps only the field {spec.field!r}; write {{{name}}}",
                    )
                )
            elif head == name and spec.field is None and field not in sampler.fields:
                problems.append(
                    PackProblem(
                        task.id,
                        where,
                        f"{{{p}}}: sampler {spec.sampler!r} returns no field {field!r} (it returns: {', '.join(sorted(sampler.fields))})",
                    )
                )
    if not problems and any(isinstance(s, StateParam) for s in task.params.values()):
        try:
            task.instantiate(0, task.clone.setup.clock.date())
        except state_params.NothingToSample as exc:
            problems.append(PackProblem(task.id, "params", exc.message))
    return problems


def contract_problems(clone: Clone, pack: TaskPack, task: Task) -> list[PackProblem]:
    """Every problem of one task against its clone's contracts (unknown verifier names are
    reported by `check_pack` itself)."""
    problems = setup_problems(clone, task)
    problems += state_param_problems(clone, task)
    if problems:
        return problems
    contract = clone.verifiers.get(task.clone.verifier.name)
    if contract is not None:
        problems += args_problems(contract, task)
        problems += answer_problems(contract, task)
    return problems


def pack_checks() -> dict[str, Any]:
    """The registry-backed keyword arguments of `realbench.taskpack.check_pack`, safety by effect
    (each golden plan run on its clone) included."""
    from clones.base import clone_names, get_clone
    from clones.effects import effect_problems

    return {
        "account_effect": lambda pack, task: effect_problems(get_clone(pack.clone), task),
        "has_clone": lambda name: name in clone_names(),
        "has_verifier": lambda clone, name: name in get_clone(clone).verifiers,
        "has_side_effect_check": lambda clone, name: name in get_clone(clone).side_effect_checks,
        "check_task": lambda pack, task: contract_problems(get_clone(pack.clone), pack, task),
    }
