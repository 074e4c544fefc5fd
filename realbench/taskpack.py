"""Task packs: one YAML file per app, shared by the clone and the real app.

A pack is parsed with pydantic; a bad pack is refused with a `PackError` that names the file, the
task id and the dotted field of every problem. Parameters are sampled from a generator seeded per
task instance, never from global random state.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable
from datetime import date, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from realbench import dates, state_params
from realbench.actions import Key, TerminateStatus
from realbench.errors import ConfigError, PackError, PackProblem
from realbench.evidence import Evidence
from realbench.hierarchy import Selector, compile_pattern, strip_spacing
from realbench.personal_data import personal_data
from realbench.recipes import (
    RECIPES_FILE,
    AccountFixture,
    RealGate,
    SetupStep,
    draw_from_fixture,
    merge_recipes,
)
from realbench.templating import placeholders, render, render_value


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- parameters -----------------------------------------------------------------------------


class ChoiceParam(_Strict):
    type: Literal["choice"]
    values: list[str | int | float] = Field(min_length=1)
    weights: list[float] | None = None

    @model_validator(mode="after")
    def _weights_match(self) -> ChoiceParam:
        if self.weights is not None:
            if len(self.weights) != len(self.values):
                raise ValueError("weights must have one entry per value")
            if any(w < 0 for w in self.weights) or sum(self.weights) <= 0:
                raise ValueError("weights must be non-negative and not all zero")
        return self

    def sample(self, rng: np.random.Generator) -> Any:
        p = None
        if self.weights is not None:
            total = sum(self.weights)
            p = [w / total for w in self.weights]
        return self.values[int(rng.choice(len(self.values), p=p))]


class IntParam(_Strict):
    type: Literal["int"]
    min: int
    max: int

    @model_validator(mode="after")
    def _ordered(self) -> IntParam:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) is greater than max ({self.max})")
        return self

    def sample(self, rng: np.random.Generator) -> int:
        return int(rng.integers(self.min, self.max + 1))


class RelativeDateParam(_Strict):
    """Samples one expression (see `realbench.dates`); resolves it against the target's clock."""

    type: Literal["relative_date"]
    exprs: list[str] = Field(min_length=1)

    @field_validator("exprs")
    @classmethod
    def _valid_exprs(cls, v: list[str]) -> list[str]:
        for e in v:
            try:
                dates.validate_expr(e)
            except ConfigError as exc:  # pydantic reports ValueErrors with the field's location
                raise ValueError(exc.message) from None
        return v

    def sample(self, rng: np.random.Generator) -> str:
        return self.exprs[int(rng.integers(len(self.exprs)))]


class StateParam(_Strict):
    """Drawn from the task's live start state by a sampler its clone registers (see
    `realbench.state_params`): a dict of fields, used in templates as ``{name.field}``."""

    type: Literal["from_state"]
    sampler: str = Field(min_length=1)
    args: dict[str, Any] = Field(default_factory=dict)
    # Keep only this field of the sample: the parameter is then a plain value, ``{name}``, which a
    # real-side account fixture may replace like a choice parameter's.
    field: str | None = None


Param = Annotated[ChoiceParam | IntParam | RelativeDateParam | StateParam, Field(discriminator="type")]


# --- answers ----------------------------------------------------------------------------------


class AnswerType(StrEnum):
    NONE = "none"
    TEXT = "text"
    NUMBER = "number"
    CHOICE = "choice"
    DATE = "date"


class AnswerSpec(_Strict):
    """The expected answer's type; the clone's verifier (or the judge) supplies the truth."""

    type: AnswerType = AnswerType.NONE
    tolerance: float = Field(default=0.0, ge=0)
    choices: list[str] | None = None

    @model_validator(mode="after")
    def _choices_for_choice(self) -> AnswerSpec:
        if self.type is AnswerType.CHOICE and not self.choices:
            raise ValueError("an answer of type 'choice' needs a non-empty 'choices' list")
        return self


# --- clone and real sides --------------------------------------------------------------------


class CloneSetup(_Strict):
    """How to build the clone's state for a task: generated world + patch + virtual clock."""

    seed: int = 0
    data: dict[str, Any] = Field(default_factory=dict)
    patch: dict[str, Any] = Field(default_factory=dict)
    clock: datetime = datetime(2026, 3, 2, 9, 0, 0)
    route: str | None = None


class VerifierRef(_Strict):
    name: str = Field(min_length=1)
    args: dict[str, Any] = Field(default_factory=dict)


class CloneSide(_Strict):
    setup: CloneSetup = Field(default_factory=CloneSetup)
    verifier: VerifierRef
    side_effect_checks: list[str] = Field(default_factory=list)


class CheckExpect(StrEnum):
    EXISTS = "exists"
    ABSENT = "absent"


class RealCheck(_Strict):
    """A check on the real app's final hierarchy, e.g. the order form shows the right train."""

    selector: Selector
    expect: CheckExpect = CheckExpect.EXISTS
    description: str = ""
    evidence: Evidence | None = None


class RealPermission(_Strict):
    """Whether a task may run on a real account at all. A task whose golden plan changes account
    state with no commit boundary before the change says ``allowed: false`` and why (check-pack
    computes the change on the clone and refuses a pack where neither holds)."""

    allowed: bool = True
    why: str = ""

    @model_validator(mode="after")
    def _reason_given(self) -> RealPermission:
        if not self.allowed and not self.why.strip():
            raise ValueError("a task not allowed on the real side must say why (real.why)")
        return self


class RealSide(RealPermission):
    """The task on the real app: whether it may run there, a recipe (see `realbench.recipes`),
    its boundary and checks."""

    package: str | None = None
    manual: list[str] = Field(default_factory=list)
    setup: list[SetupStep] = Field(default_factory=list)
    boundary: list[Selector] = Field(default_factory=list)
    checks: list[RealCheck] = Field(default_factory=list)
    golden: list[PlanStep] = Field(default_factory=list)
    fixtures: RealGate = Field(default_factory=RealGate)
    unmatched: list[str] = Field(default_factory=list)


class JudgeSpec(_Strict):
    rubric: str = Field(min_length=1)


# --- golden plans ------------------------------------------------------------------------------


class SwipeDirection(StrEnum):
    UP = "up"
    DOWN = "down"
    LEFT = "left"
    RIGHT = "right"


class TypeStep(_Strict):
    text: str
    into: Selector | None = None


class SwipeStep(_Strict):
    direction: SwipeDirection = SwipeDirection.UP
    distance: float = Field(default=0.5, gt=0, le=0.9)


class ScrollToStep(_Strict):
    selector: Selector
    direction: SwipeDirection = SwipeDirection.UP
    max_swipes: int = Field(default=8, ge=1, le=50)


class ReadAnswer(_Strict):
    """Answer with text read off the screen: the node's text, optionally a regex group."""

    read: Selector
    regex: str | None = None


class PlanStep(_Strict):
    """One golden-plan step. Exactly one action field is set; `evidence` (real-side plans) says what
    backs the step's selectors."""

    tap: Selector | None = None
    long_press: Selector | None = None
    type: str | TypeStep | None = None
    swipe: SwipeStep | None = None
    scroll_to: ScrollToStep | None = None
    key: Key | None = None
    wait: float | None = Field(default=None, gt=0, le=30)
    open_app: str | None = None
    answer: str | ReadAnswer | None = None
    terminate: TerminateStatus | None = None
    evidence: Evidence | None = None

    @model_validator(mode="before")
    @classmethod
    def _exactly_one(cls, data: Any) -> Any:
        if isinstance(data, dict):
            set_fields = [k for k, v in data.items() if v is not None and k != "evidence"]
            if len(set_fields) != 1:
                raise ValueError(
                    f"a plan step sets exactly one of tap, long_press, type, swipe, scroll_to, key, wait, open_app, answer, terminate (got {set_fields or 'none'})"
                )
        return data

    @property
    def kind(self) -> str:
        return next(k for k, v in self.__dict__.items() if v is not None and k != "evidence")

    def selectors(self) -> list[Selector]:
        out: list[Selector] = []
        if self.tap:
            out.append(self.tap)
        if self.long_press:
            out.append(self.long_press)
        if isinstance(self.type, TypeStep) and self.type.into:
            out.append(self.type.into)
        if self.scroll_to:
            out.append(self.scroll_to.selector)
        return out

    def strings(self) -> list[str]:
        """Every template string in the step, for placeholder checks."""
        out: list[str] = [
            s for sel in self.selectors() for s in sel.model_dump().values() if isinstance(s, str)
        ]
        if isinstance(self.type, str):
            out.append(self.type)
        elif isinstance(self.type, TypeStep):
            out.append(self.type.text)
        if isinstance(self.answer, str):
            out.append(self.answer)
        if self.open_app:
            out.append(self.open_app)
        return out


# --- tasks and packs ---------------------------------------------------------------------------

TASK_ID = r"^[a-z0-9][a-z0-9_.-]{1,80}$"


class Task(_Strict):
    id: str = Field(pattern=TASK_ID)
    instruction: str = Field(min_length=1)
    params: dict[str, Param] = Field(default_factory=dict)
    difficulty: int = Field(ge=1, le=4)
    tags: list[str] = Field(default_factory=list)
    max_steps: int = Field(default=20, ge=1, le=200)
    answer: AnswerSpec = Field(default_factory=AnswerSpec)
    clone: CloneSide
    real: RealSide = Field(default_factory=RealSide)
    judge: JudgeSpec
    golden: list[PlanStep] = Field(min_length=1)

    @model_validator(mode="after")
    def _placeholders_declared(self) -> Task:
        known = set(self.params) | {f"{n}_date" for n in self.params} | {f"{n}_md" for n in self.params}
        used: set[str] = {p.split(".")[0] for p in placeholders(self.instruction)}
        for step in [*self.golden, *self.real.golden]:
            for s in step.strings():
                used |= {p.split(".")[0] for p in placeholders(s)}
        for s in _strings_in(self.clone.verifier.args):
            used |= {p.split(".")[0] for p in placeholders(s)}
        for check in self.real.checks:
            for s in check.selector.model_dump().values():
                if isinstance(s, str):
                    used |= {p.split(".")[0] for p in placeholders(s)}
        unknown = sorted(used - known)
        if unknown:
            raise ValueError(
                f"placeholders {unknown} are not declared in params (declared: {sorted(self.params) or 'none'})"
            )
        if self.answer.type is not AnswerType.NONE and not any(s.answer is not None for s in self.golden):
            raise ValueError("the task expects an answer but its golden plan never answers")
        return self

    def instantiate(self, seed: int, today: date, chosen: dict[str, Any] | None = None) -> TaskInstance:
        """Sample parameters from a generator seeded by (task id, seed); resolve dates against `today`.

        `chosen` fixes some raw parameter values (a date expression for a date parameter) instead of
        sampling them; derived values (``NAME_date``, ``NAME_md``) follow from them as usual.
        A ``from_state`` parameter is drawn by its clone's sampler from the start state that
        ``clone.setup`` builds (a chosen value replaces it without drawing)."""
        digest = hashlib.sha256(f"{self.id}:{seed}".encode()).digest()
        rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
        values: dict[str, Any] = {}
        for name, spec in self.params.items():
            if isinstance(spec, StateParam):
                if chosen is not None and name in chosen:
                    values[name] = chosen[name]
                    continue
                drawn = state_params.sample(
                    self.id, name, spec.sampler, spec.args, self.clone.setup, rng, today
                )
                values[name] = drawn[spec.field] if spec.field else drawn
                continue
            raw = spec.sample(rng)
            if chosen is not None and name in chosen:
                raw = chosen[name]
            if isinstance(spec, RelativeDateParam):
                resolved = dates.resolve(str(raw), today)
                values[name] = resolved.phrase
                values[f"{name}_date"] = resolved.iso
                values[f"{name}_md"] = resolved.month_day
            else:
                values[name] = raw
        return TaskInstance(
            task=self,
            seed=seed,
            params=values,
            instruction=render(self.instruction, values),
        )


def _strings_in(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for v in value:
            yield from _strings_in(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings_in(v)


def strings_in(value: Any) -> list[str]:
    """Every string inside a nested structure (verifier arguments, say)."""
    return list(_strings_in(value))


class TaskInstance(BaseModel):
    """A task with sampled parameters: what one episode runs."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    task: Task
    seed: int
    params: dict[str, Any]
    instruction: str

    @field_validator("task", mode="plain")
    @classmethod
    def _loaded_task(cls, value: Any) -> Task:
        # A loaded Task was validated when its pack was loaded; pydantic would otherwise run its
        # model validators again for every instance (0.4 of the 0.5 ms a train-ticketing draw took).
        if not isinstance(value, Task):
            raise ValueError(f"a TaskInstance's task is a loaded Task, not {type(value).__name__}")
        return value

    @property
    def verifier_args(self) -> dict[str, Any]:
        return {**self.params, **render_value(self.task.clone.verifier.args, self.params)}

    def boundary(self) -> list[Selector]:
        return [s.format(self.params) for s in self.task.real.boundary]


class Popup(_Strict):
    """A pop-up (a ROM permission prompt, an app's launch ad) and the control that dismisses it.

    `when` recognises it on screen; `tap` is what setup and health checks tap to dismiss it. The
    agent's own steps are never altered."""

    name: str = Field(min_length=1)
    when: Selector
    tap: Selector


class SafeInput(StrEnum):
    """What a screen of a money-moving app's safe-screen catalogue allows beyond touches on its
    native controls (which every catalogued screen allows)."""

    TEXT = "text"  # typing (never into a password / code field or a PIN pad)
    WEBVIEW_TAPS = "webview_taps"  # taps into WebView / canvas regions that expose no text
    ENTER = "enter"  # ENTER, and typed text with a newline (an IME action submits the form)


class SafeScreen(_Strict):
    """A screen of a money-moving app that the pack's author vouches for. A money-moving app's
    interlock is default-deny: an input goes through only while a catalogued screen is recognised,
    i.e. a node matching `when` (one selector, or a list: any one of them) is on screen. Such a
    screen allows touches on its native controls, plus the inputs in `allow`; stop controls on it
    are still never activated. `name` is the screen's id (the clone's route), so a rename of the
    screen or its marker ids is one edit here (docs/real-side.md)."""

    name: str = Field(min_length=1)
    when: Selector | list[Selector]
    allow: list[SafeInput] = Field(default_factory=list)
    # The controls the screen is known to have, by resource id (`payee_p*`: a prefix, for rows drawn
    # from the account's data), or by a selector where the real app's control has no known id (a
    # grid's first item: `{inside: {resource_id: grid_function}, nth: 0}`). When given, a touch
    # must land on one of them, or on a control without an id that shows text (a dialog's
    # buttons): an unknown control is not touched.
    controls: list[str | Selector] = Field(default_factory=list)

    @property
    def markers(self) -> list[Selector]:
        return list(self.when) if isinstance(self.when, list) else [self.when]

    @model_validator(mode="after")
    def _has_a_marker(self) -> SafeScreen:
        if not self.markers:
            raise ValueError(f"safe screen {self.name!r}: `when` needs at least one selector")
        return self


class RealApp(_Strict):
    package: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)+$")
    name: str
    version: str | None = None
    forbidden: list[Selector] = Field(default_factory=list)
    logged_in_probe: Selector | None = None
    # Steps that bring the probe on screen (an app whose launch screen looks the same logged in or
    # out) and steps that return to the launch screen afterwards.
    probe_via: list[SetupStep] = Field(default_factory=list)
    probe_back: list[SetupStep] = Field(default_factory=list)
    # The app's own launch pop-ups (splash ads) that a lab's harness skips before handing over.
    popups: list[Popup] = Field(default_factory=list)
    # The catalogue of known safe screens: in a money-moving app, the only screens input reaches.
    safe_screens: list[SafeScreen] = Field(default_factory=list)
    # URL schemes the pack's deep links may use (setup steps); any other deep link is refused.
    url_schemes: list[str] = Field(default_factory=list)
    # The `safe_screens` entry (by name) of the app's login screen: the one screen a rig account's
    # login recipe may type credentials on, into a field the entry lists (the interlock's login
    # door refuses while no entry of that name is recognised).
    login_screen: str | None = None


class PackPolicy(_Strict):
    """Pack-wide safety rules that check-pack enforces."""

    money_moving: bool = False
    require_boundary_tags: list[str] = Field(default_factory=list)


class TaskPack(_Strict):
    app: str = Field(min_length=1)
    clone: str = Field(min_length=1)
    title: str = ""
    version: int = 1
    real_app: RealApp
    policy: PackPolicy = Field(default_factory=PackPolicy)
    tasks: list[Task] = Field(min_length=1)
    path: str | None = Field(default=None, exclude=True)

    @model_validator(mode="after")
    def _unique_ids(self) -> TaskPack:
        seen: set[str] = set()
        dupes = [t.id for t in self.tasks if t.id in seen or seen.add(t.id)]  # type: ignore[func-returns-value]
        if dupes:
            raise ValueError(f"duplicate task ids: {sorted(set(dupes))}")
        return self

    def task(self, task_id: str) -> Task:
        for t in self.tasks:
            if t.id == task_id:
                return t
        raise ConfigError(
            f"pack {self.app!r} has no task {task_id!r}",
            hint=f"`realbench check-pack --list {self.path or 'PACK'}` lists its tasks",
        )

    def package_for(self, task: Task) -> str:
        return task.real.package or self.real_app.package


# --- loading and checking ----------------------------------------------------------------------


def _problems_from(exc: ValidationError, raw: dict[str, Any]) -> list[PackProblem]:
    problems: list[PackProblem] = []
    tasks = raw.get("tasks") if isinstance(raw, dict) else None
    for err in exc.errors():
        loc = list(err["loc"])
        task_id: str | None = None
        if len(loc) >= 2 and loc[0] == "tasks" and isinstance(loc[1], int):
            idx = loc[1]
            if isinstance(tasks, list) and idx < len(tasks) and isinstance(tasks[idx], dict):
                task_id = str(tasks[idx].get("id", f"#{idx}"))
            else:
                task_id = f"#{idx}"
            loc = loc[2:]
        # drop discriminator tags pydantic inserts (e.g. 'choice') so the path reads as written
        parts = [
            str(p)
            for p in loc
            if not (
                isinstance(p, str)
                and p in ("choice", "int", "relative_date", "str", "TypeStep", "ReadAnswer")
            )
        ]
        field = ".".join(parts) or "(task)"
        problems.append(PackProblem(task_id, field, err["msg"]))
    return problems


def parse_pack(raw: Any, path: str = "<memory>") -> TaskPack:
    if not isinstance(raw, dict):
        raise PackError(
            path,
            [
                PackProblem(
                    None, "(file)", "a pack must be a YAML mapping with app, clone, real_app and tasks"
                )
            ],
        )
    try:
        pack = TaskPack.model_validate(raw)
    except ValidationError as exc:
        raise PackError(path, _problems_from(exc, raw)) from None
    unguarded = _unguarded_money_problems(pack)
    if unguarded:
        raise PackError(path, unguarded)
    pack.path = path
    return pack


def _unguarded_money_problems(pack: TaskPack) -> list[PackProblem]:
    """A money-moving pack names its always-forbidden controls: without them the interlock guards
    only each task's own boundary, and a pay button elsewhere in the app stays pressable."""
    if pack.policy.money_moving and not pack.real_app.forbidden:
        return [
            PackProblem(
                None,
                "real_app.forbidden",
                "a money-moving pack (policy.money_moving: true) must list its always-forbidden "
                "controls (pay, confirm transfer, submit order...)",
            )
        ]
    return []


def pack_file(path: str | Path) -> Path:
    p = Path(path)
    if p.is_dir():
        p = p / "pack.yaml"
    return p


def load_pack(path: str | Path) -> TaskPack:
    """Load `taskpacks/<app>/pack.yaml` (or a directory holding one)."""
    p = pack_file(path)
    if not p.exists():
        raise ConfigError(
            f"no task pack at {p}", hint="pass a pack.yaml or a folder under taskpacks/ that holds one"
        )
    raw = _read_yaml(p)
    recipes = p.parent / RECIPES_FILE
    if recipes.exists():
        raw = merge_recipes(raw, _read_yaml(recipes), str(recipes))
    return parse_pack(raw, str(p))


def _read_yaml(p: Path) -> Any:
    from realbench.safe_yaml import YamlRefused, load_yaml_text, read_yaml_file

    text = read_yaml_file(p, what="task pack")
    try:
        return load_yaml_text(text)
    except YamlRefused as exc:
        raise PackError(str(p), [PackProblem(None, "(yaml)", exc.message)]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "unknown line"
        raise PackError(
            str(p), [PackProblem(None, f"(yaml {where})", str(getattr(exc, "problem", exc)))]
        ) from None


VerifierLookup = Callable[[str, str], bool]
TaskCheck = Callable[["TaskPack", "Task"], list[PackProblem]]


def check_pack(
    pack: TaskPack,
    *,
    has_clone: Callable[[str], bool] | None = None,
    has_verifier: VerifierLookup | None = None,
    has_side_effect_check: VerifierLookup | None = None,
    check_task: TaskCheck | None = None,
    account_effect: TaskCheck | None = None,
) -> list[PackProblem]:
    """Cross-field checks that need more than the schema: registered names and safety rules.

    `has_clone(name)` and `has_verifier(clone, name)` come from the clone registry, `check_task`
    from the clone's verifier contracts, and `account_effect(pack, task)` runs the task's golden plan
    on the clone and names an account change that no commit boundary guards (the CLI wires them all,
    see `clones.contracts.pack_checks`). Without them only the pack-internal rules run.
    """
    problems: list[PackProblem] = _unguarded_money_problems(pack)
    if has_clone is not None and not has_clone(pack.clone):
        problems.append(PackProblem(None, "clone", f"no clone named {pack.clone!r} is registered"))
        has_verifier = None
        check_task = None
        account_effect = None
    forbidden = pack.real_app.forbidden
    problems += _foreign_launch_problems(pack)
    for task in pack.tasks:
        if has_verifier is not None and not has_verifier(pack.clone, task.clone.verifier.name):
            problems.append(
                PackProblem(
                    task.id,
                    "clone.verifier.name",
                    f"clone {pack.clone!r} has no verifier {task.clone.verifier.name!r}",
                )
            )
        if has_side_effect_check is not None:
            for i, name in enumerate(task.clone.side_effect_checks):
                if not has_side_effect_check(pack.clone, name):
                    problems.append(
                        PackProblem(
                            task.id,
                            f"clone.side_effect_checks.{i}",
                            f"clone {pack.clone!r} has no side-effect check {name!r}",
                        )
                    )
        contract = check_task(pack, task) if check_task is not None else []
        problems += contract
        problems += _boundary_problems(pack, task, forbidden)
        problems += _personal_data_problems(task)
        # A task whose setup or arguments break its contract cannot be played to measure its effect.
        if account_effect is not None and not contract:
            problems += account_effect(pack, task)
    return problems


def url_scheme(url: str) -> str:
    """The scheme of a deep link (``alipays://…`` → ``alipays``), lower case; "" if it has none."""
    head, sep, _ = url.partition(":")
    return head.strip().lower() if sep and re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", head.strip()) else ""


def _foreign_launch_problems(pack: TaskPack) -> list[PackProblem]:
    """A money-moving pack's setup and probe steps start no other app and follow no deep link
    outside its declared URL schemes: another app (a wallet, a browser cashier) can commit."""
    if not pack.policy.money_moving:
        return []
    from realbench.recipes import DeepLinkStep, LaunchStep

    packages = {pack.real_app.package} | {t.real.package for t in pack.tasks if t.real.package}
    schemes = {s.lower() for s in pack.real_app.url_schemes}
    places: list[tuple[str | None, str, list[Any]]] = [
        (None, "real_app.probe_via", list(pack.real_app.probe_via)),
        (None, "real_app.probe_back", list(pack.real_app.probe_back)),
    ]
    places += [(t.id, "real.setup", list(t.real.setup)) for t in pack.tasks]
    problems: list[PackProblem] = []
    for task_id, where, steps in places:
        for i, step in enumerate(steps):
            if isinstance(step, LaunchStep) and step.package and step.package not in packages:
                problems.append(
                    PackProblem(
                        task_id,
                        f"{where}.{i}",
                        f"launch of {step.package!r}, not one of the pack's packages, in a money-moving pack",
                    )
                )
            if isinstance(step, DeepLinkStep) and url_scheme(step.url) not in schemes:
                problems.append(
                    PackProblem(
                        task_id,
                        f"{where}.{i}",
                        f"deep link {step.url!r}: scheme {url_scheme(step.url) or '(none)'!r} is not in "
                        "real_app.url_schemes of this money-moving pack",
                    )
                )
    return problems


_PERSONAL_DATA_FIX = {
    "id_number": "use an ID number with a wrong check character",
    "mobile": "mobile numbers have no reserved fictional range, so take it from the lab's account fixture",
}


def _personal_data_problems(task: Task) -> list[PackProblem]:
    """A real-allowed task types no ID number that could be a person's, and no mobile number."""
    if not task.real.allowed:
        return []
    return [
        PackProblem(
            task.id,
            datum.where,
            f"a real-allowed task would submit {datum.kind.replace('_', ' ')} {datum.value}, which could be a real "
            f"person's: {_PERSONAL_DATA_FIX[datum.kind]}, or set real: {{allowed: false, why: ...}}",
        )
        for datum in personal_data(task)
    ]


def _same_control(a: Selector, b: Selector) -> bool:
    keys = ("text", "text_contains", "text_regex", "text_pattern", "resource_id", "content_desc")
    da, db = a.model_dump(), b.model_dump()
    return any(da[k] is not None and da[k] == db[k] for k in keys)


def _may_hit(step: Selector, stop: Selector) -> bool:
    """Could a plan selector land on the stop control? Looser than `_same_control`: a substring or
    pattern that also matches the stop's label counts (money-moving packs use it, so a plan cannot
    slip past '确认转账' by tapping text_contains '确认')."""
    if _same_control(step, stop):
        return True
    labels = [t for t in (stop.text, stop.text_contains) if t]
    if step.text_contains is not None and any(step.text_contains in t for t in labels):
        return True
    if step.text_regex is not None and any(re.search(step.text_regex, t) for t in labels):
        return True
    if step.text_pattern is not None and any(
        compile_pattern(step.text_pattern).fullmatch(strip_spacing(t)) for t in labels
    ):
        return True
    if step.text is not None:
        if stop.text_contains is not None and stop.text_contains in step.text:
            return True
        if stop.text_regex is not None and re.search(stop.text_regex, step.text):
            return True
    short = lambda rid: rid.rsplit("/", 1)[-1]  # noqa: E731
    return (
        step.resource_id is not None
        and stop.resource_id is not None
        and short(step.resource_id) == short(stop.resource_id)
    )


def _boundary_problems(pack: TaskPack, task: Task, forbidden: list[Selector]) -> list[PackProblem]:
    """A plan may reach a commit boundary only as its last action; checks never target one."""
    problems: list[PackProblem] = []
    stops = list(task.real.boundary) + list(forbidden)
    same = _may_hit if pack.policy.money_moving else _same_control
    for i, step in enumerate(task.golden):
        for sel in step.selectors():
            if step.scroll_to is not None:
                continue
            if any(same(sel, b) for b in stops):
                later = [
                    s
                    for s in task.golden[i + 1 :]
                    if s.terminate is None and s.answer is None and s.wait is None
                ]
                if later:
                    problems.append(
                        PackProblem(
                            task.id,
                            f"golden.{i}",
                            "the plan goes past a commit boundary: a step that crosses it must be the last action",
                        )
                    )
                if not any(_same_control(sel, b) for b in task.real.boundary):
                    problems.append(
                        PackProblem(
                            task.id,
                            f"golden.{i}",
                            f"the plan taps an always-forbidden control {sel}, which is not declared in real.boundary",
                        )
                    )
    problems += _recipe_problems(task, stops, same)
    tags = set(task.tags) & set(pack.policy.require_boundary_tags)
    if tags and not task.real.boundary:
        problems.append(
            PackProblem(
                task.id,
                "real.boundary",
                f"tasks tagged {sorted(tags)} move money or commit orders and must declare a commit boundary",
            )
        )
    if pack.policy.money_moving and tags and task.real.boundary:
        problems += _plan_ends_at_boundary(task)
    return problems


def _recipe_problems(
    task: Task, stops: list[Selector], same: Callable[[Selector, Selector], bool]
) -> list[PackProblem]:
    """Setup never touches a stop control; the real golden plan may cross one only as its last action."""
    problems: list[PackProblem] = []
    for i, setup_step in enumerate(task.real.setup):
        for sel in setup_step.selectors():
            if getattr(setup_step, "do", "") != "wait_for" and any(same(sel, b) for b in stops):
                problems.append(
                    PackProblem(
                        task.id, f"real.setup.{i}", f"real-app setup acts on a commit-boundary control {sel}"
                    )
                )
    for i, step in enumerate(task.real.golden):
        for sel in step.selectors():
            if step.scroll_to is None and any(same(sel, b) for b in stops):
                later = [
                    s
                    for s in task.real.golden[i + 1 :]
                    if s.terminate is None and s.answer is None and s.wait is None
                ]
                if later:
                    problems.append(
                        PackProblem(
                            task.id,
                            f"real.golden.{i}",
                            "the real golden plan goes past a commit boundary: a step that crosses it must be the last action",
                        )
                    )
    return problems


def _plan_ends_at_boundary(task: Task) -> list[PackProblem]:
    """In a money-moving pack, a boundary task's plan ends by tapping its boundary: the golden run
    then proves the boundary is reachable, and nothing (a typed password, an SMS code) follows it."""
    actions = [s for s in task.golden if s.terminate is None and s.answer is None and s.wait is None]
    last = actions[-1] if actions else None
    if last is None or last.tap is None or not any(_same_control(last.tap, b) for b in task.real.boundary):
        return [
            PackProblem(
                task.id,
                f"golden.{len(task.golden) - 1}",
                "in a money-moving pack the plan of a boundary task must end by tapping one of its real.boundary controls",
            )
        ]
    return []


# --- the real side's account fixtures ------------------------------------------------------------


def fixture_choices(task: Task) -> dict[str, list[Any] | None]:
    """The values each fixture-drawn parameter of a task allows (None: whatever the account holds)."""
    out: dict[str, list[Any] | None] = {}
    for name in task.real.fixtures.params:
        spec = task.params.get(name)
        out[name] = list(spec.values) if isinstance(spec, ChoiceParam) else None
    return out


def instantiate_from_fixture(
    task: Task, seed: int, today: date, fixture: AccountFixture | None
) -> TaskInstance:
    """A real-side instance: parameters the task draws from fixture fields come from the account."""
    instance = task.instantiate(seed, today)
    if fixture is None or not task.real.fixtures.params:
        return instance
    drawn = draw_from_fixture(task.id, seed, task.real.fixtures, fixture_choices(task), fixture)
    if not drawn:
        return instance
    params = {**instance.params, **drawn}
    return instance.model_copy(update={"params": params, "instruction": render(task.instruction, params)})
