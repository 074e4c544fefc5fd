"""Real-side recipes: the typed steps that put a real app where a task starts, and account fixtures.

A task's `real:` block holds a recipe: `manual` preconditions (prose a person confirms, the only
prose allowed), typed `setup` steps with `expect` checks that must all hold before the agent
starts, a `golden` plan in the real app's selectors (up to the commit boundary or the answer
read), the fixture fields its parameters are drawn from, and what of the recipe is known not to
match the real app. The format is flat and keyed by `do:`, so a recorder can write it one step at
a time:

    setup:
      - {do: launch}
      - {do: tap, selector: {text: 常用乘车人}, expect: [{selector: {text: 添加乘车人}}]}
      - {do: wait_for, selector: {resource_id: ticket_home_btn_search}, timeout_s: 5,
         evidence: {level: script, source: 'fs#26127499662'}}
      - {do: wait_for, activity: com.alipay.mobile.nebulacore.ui.H5Activity}

Every step, expectation and selector may say what public evidence backs it (`evidence:`, see
`realbench.evidence`); `realbench check-pack --evidence` reports it.

Account fixtures (a rig account's `fixture:`) say what a lab's test account really holds. On the
real side a parameter that names a fixture field is drawn from the account's values; on the clone
it is drawn from the world model (the task's own `params`).
"""

from __future__ import annotations

import hashlib
import os
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from realbench.evidence import Evidence
from realbench.hierarchy import Selector


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- expectations and setup steps -------------------------------------------------------------


class ExpectState(StrEnum):
    EXISTS = "exists"
    ABSENT = "absent"


class Expect(_Strict):
    """A fact about the screen after a setup step; every one must hold before the agent starts."""

    selector: Selector
    state: ExpectState = ExpectState.EXISTS
    timeout_s: float = Field(default=5.0, ge=0, le=60)
    evidence: Evidence | None = None


class _Step(_Strict):
    expect: list[Expect] = Field(default_factory=list)
    note: str = ""
    evidence: Evidence | None = None

    def selectors(self) -> list[Selector]:
        return []


class LaunchStep(_Step):
    """Stop and start the app (its package by default): the cold start a task begins from."""

    do: Literal["launch"]
    package: str | None = None


class DeepLinkStep(_Step):
    do: Literal["deep_link"]
    url: str = Field(min_length=3)


class TapStep(_Step):
    do: Literal["tap"]
    selector: Selector
    timeout_s: float = Field(default=5.0, ge=0, le=60)

    def selectors(self) -> list[Selector]:
        return [self.selector]


class TypeTextStep(_Step):
    do: Literal["type"]
    text: str
    into: Selector | None = None

    def selectors(self) -> list[Selector]:
        return [self.into] if self.into else []


class ScrollStep(_Step):
    """Swipe until the selector is fully on screen."""

    do: Literal["scroll"]
    selector: Selector
    direction: Literal["up", "down", "left", "right"] = "up"
    max_swipes: int = Field(default=8, ge=1, le=50)

    def selectors(self) -> list[Selector]:
        return [self.selector]


class WaitForStep(_Step):
    """Wait until a control shows (`selector`) or an activity is in front (`activity`: the full
    class name, a name starting with `.` relative to the app's package, or the bare class name)."""

    do: Literal["wait_for"]
    selector: Selector | None = None
    activity: str | None = Field(default=None, min_length=1)
    timeout_s: float = Field(default=5.0, ge=0, le=60)

    @model_validator(mode="after")
    def _one_target(self) -> WaitForStep:
        if (self.selector is None) == (self.activity is None):
            raise ValueError("wait_for needs exactly one of selector and activity")
        return self

    def selectors(self) -> list[Selector]:
        return [self.selector] if self.selector is not None else []


def activity_matches(wanted: str, current: str | None, package: str) -> bool:
    """Whether the activity in front (as `dumpsys` prints it: full, or `.Name` relative to its
    package) is the one a step names (full, `.Name` relative to `package`, or the bare class name)."""
    if not current:
        return False
    full = package + current if current.startswith(".") else current
    if wanted.startswith("."):
        return full == package + wanted
    if "." in wanted:
        return full == wanted
    return full.rsplit(".", 1)[-1] == wanted


class BackStep(_Step):
    do: Literal["back"]


class HomeStep(_Step):
    do: Literal["home"]


SetupStep = Annotated[
    LaunchStep | DeepLinkStep | TapStep | TypeTextStep | ScrollStep | WaitForStep | BackStep | HomeStep,
    Field(discriminator="do"),
]


# --- account fixtures ---------------------------------------------------------------------------


class FixtureField(StrEnum):
    """What a test account can hold that a task's parameters may name."""

    PASSENGERS = "passengers"
    PAYEES = "payees"
    CARD_TAILS = "card_tails"
    BILL_ACCOUNTS = "bill_accounts"
    FUNDS = "funds"
    REMINDERS = "reminders"
    ROUTES = "routes"
    ORDERS = "orders"
    BRANCHES = "branches"
    FACTS = "facts"


class AccountFixture(_Strict):
    """What a rig account really holds. Strings as the app shows them (a route is `北京-上海`)."""

    passengers: list[str] = Field(default_factory=list)
    payees: list[str] = Field(default_factory=list)
    card_tails: list[str] = Field(default_factory=list)
    bill_accounts: list[str] = Field(default_factory=list)
    funds: list[str] = Field(default_factory=list)
    reminders: list[str] = Field(default_factory=list)
    routes: list[str] = Field(default_factory=list)
    orders: list[str] = Field(default_factory=list)
    branches: list[str] = Field(default_factory=list)
    # Named facts a task relies on (e.g. `unpaid-order`, `sold-out-train`).
    facts: list[str] = Field(default_factory=list)

    def values(self, name: FixtureField) -> list[str]:
        return list(getattr(self, name.value))


class RealGate(_Strict):
    """What a task needs from the account: parameters drawn from fixture fields, literal values."""

    # param name -> the fixture field its values come from on the real side
    params: dict[str, FixtureField] = Field(default_factory=dict)
    # fixture field -> values that must all be held (the task's instruction names them)
    holds: dict[FixtureField, list[str]] = Field(default_factory=dict)


def fixture_gaps(
    gate: RealGate, choices: dict[str, list[Any] | None], fixture: AccountFixture | None
) -> list[str]:
    """Why an account cannot instantiate a task ([] when it can). `choices` maps each
    fixture-drawn parameter to the values the task allows (None: any value the account holds)."""
    if not gate.params and not gate.holds:
        return []
    if fixture is None:
        return ["the account declares no fixture"]
    gaps: list[str] = []
    for name, field in gate.params.items():
        held = fixture.values(field)
        allowed = choices.get(name)
        usable = [v for v in held if allowed is None or v in [str(a) for a in allowed]]
        if not usable:
            gaps.append(f"param {name}: the account holds no {field.value} the task allows")
    for field, needed in gate.holds.items():
        missing = [v for v in needed if v not in fixture.values(field)]
        if missing:
            gaps.append(f"{field.value} lacks {', '.join(missing)}")
    return gaps


def draw_from_fixture(
    task_id: str, seed: int, gate: RealGate, choices: dict[str, list[Any] | None], fixture: AccountFixture
) -> dict[str, str]:
    """The fixture-drawn parameter values of one instance, from a generator seeded like the task's."""
    digest = hashlib.sha256(f"{task_id}:{seed}:fixture".encode()).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
    out: dict[str, str] = {}
    for name, field in sorted(gate.params.items()):
        allowed = choices.get(name)
        usable = [v for v in fixture.values(field) if allowed is None or v in [str(a) for a in allowed]]
        if usable:
            out[name] = usable[int(rng.integers(len(usable)))]
    return out


# --- the recipes file beside a pack --------------------------------------------------------------

# Real-side recipes live beside the pack (`taskpacks/<app>/real.yaml`), keyed by task id, so a
# recorder can write one task's recipe without rewriting the pack.
RECIPES_FILE = "real.yaml"
RECIPE_KEYS = ("manual", "setup", "golden", "fixtures", "unmatched")


def merge_recipes(pack: Any, recipes: Any, path: str) -> Any:
    """The pack's raw mapping with each task's recipe merged into its `real:` block.

    A recipe field the pack itself also sets, an unknown task id or an unknown key is refused."""
    from realbench.errors import PackError, PackProblem

    if not isinstance(pack, dict) or recipes is None:
        return pack
    if not isinstance(recipes, dict) or not isinstance(recipes.get("tasks", {}), dict):
        raise PackError(
            path, [PackProblem(None, "(file)", "a recipes file is a mapping with `tasks: {id: recipe}`")]
        )
    tasks = {t.get("id"): t for t in pack.get("tasks", []) if isinstance(t, dict)}
    problems: list[PackProblem] = []
    for task_id, recipe in (recipes.get("tasks") or {}).items():
        task = tasks.get(task_id)
        if task is None:
            problems.append(PackProblem(str(task_id), "(recipe)", "no task with this id in the pack"))
            continue
        if not isinstance(recipe, dict):
            problems.append(PackProblem(str(task_id), "(recipe)", "a recipe is a mapping"))
            continue
        problems += evidence_problems(str(task_id), recipe, "real")
        real = dict(task.get("real") or {})
        for key, value in recipe.items():
            if key not in RECIPE_KEYS:
                problems.append(
                    PackProblem(
                        str(task_id), f"real.{key}", f"not a recipe key (one of {', '.join(RECIPE_KEYS)})"
                    )
                )
            elif key in real:
                problems.append(
                    PackProblem(str(task_id), f"real.{key}", "set both in the pack and in the recipes file")
                )
            else:
                real[key] = value
        task["real"] = real
    if problems:
        raise PackError(path, problems)
    return pack


def evidence_problems(task_id: str, value: Any, where: str) -> list[Any]:
    """Every `evidence:` entry inside a raw recipe that does not validate, named by task and dotted
    field, so a bad level is reported against the recipes file that holds it."""
    from pydantic import ValidationError

    from realbench.errors import PackProblem

    problems: list[PackProblem] = []
    if isinstance(value, dict):
        for key, item in value.items():
            path = f"{where}.{key}"
            if key == "evidence":
                try:
                    Evidence.model_validate(item)
                except ValidationError as exc:
                    for err in exc.errors():
                        field = ".".join([path, *(str(p) for p in err["loc"])])
                        problems.append(PackProblem(task_id, field, err["msg"]))
            else:
                problems += evidence_problems(task_id, item, path)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            problems += evidence_problems(task_id, item, f"{where}.{i}")
    return problems


def save_recipe(pack_dir: Path, task_id: str, recipe: dict[str, Any]) -> Path:
    """Write one task's recipe into `pack_dir/real.yaml` (what a recorder calls).

    The previous file is kept as `real.yaml.bak`; the pack with the new recipe must load (its
    schema and merge rules hold) or nothing is written."""
    import shutil

    import yaml

    from realbench.safe_yaml import load_yaml_text, read_yaml_file
    from realbench.taskpack import load_pack

    path = pack_dir / RECIPES_FILE
    current: dict[str, Any] = {}
    if path.exists():
        current = load_yaml_text(read_yaml_file(path, what="recipes")) or {}
    current.setdefault("tasks", {})[task_id] = recipe
    text = yaml.safe_dump(current, allow_unicode=True, sort_keys=False, width=110)
    tmp = pack_dir / f".{RECIPES_FILE}.new"
    tmp.write_text(text, encoding="utf-8")
    backup = pack_dir / f"{RECIPES_FILE}.bak"
    if path.exists():
        shutil.copy2(path, backup)
    os.replace(tmp, path)
    try:
        load_pack(pack_dir)
    except Exception:
        if backup.exists():
            os.replace(backup, path)
        else:
            path.unlink()
        raise
    return path
