"""How well public evidence backs a pack's real side, and where the pack contradicts it.

A *real step* is one entry of a task's real side that finds something on the phone: a setup step with
a selector or an activity, an `expect` of a setup step, a real golden step with a selector (tap, long
press, typing into a field, scroll target, answer read), a check, a boundary entry. Its evidence is
the entry's own `evidence:`, else its selector's. A step *rests on script or better* when that level
is `dump` or `script`.

The facts of record (docs/real-apps.md) are kept machine-readable beside each pack
(`taskpacks/<app>/evidence.yaml`, `EvidenceTable`). A selector *contradicts* them when it uses a name
the record says is wrong for the control (`hp_query_button` for the query button), or when it
claims a level stronger than the record gives the control it names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from realbench.errors import ConfigError
from realbench.evidence import Evidence, EvidenceLevel
from realbench.hierarchy import Selector, fold_spacing
from realbench.recipes import WaitForStep, activity_matches
from realbench.taskpack import PlanStep, Task, TaskPack

EVIDENCE_FILE = "evidence.yaml"
SCRIPT_OR_BETTER = frozenset({EvidenceLevel.DUMP, EvidenceLevel.SCRIPT})


class Fact(BaseModel):
    """One control (or activity) of the real app as the evidence of record names it."""

    model_config = ConfigDict(extra="forbid")

    resource_id: str | None = None
    text: str | None = None
    text_contains: str | None = None
    content_desc: str | None = None
    class_name: str | None = None
    activity: str | None = None
    h5: bool = False
    level: EvidenceLevel
    source: str = Field(min_length=1)
    wrong_names: list[str] = Field(default_factory=list)


class EvidenceTable(BaseModel):
    model_config = ConfigDict(extra="forbid")

    app: str
    package: str
    facts: dict[str, Fact]

    def by_id(self, rid: str) -> list[tuple[str, Fact]]:
        short = rid.rsplit("/", 1)[-1]
        return [(k, f) for k, f in self.facts.items() if f.resource_id == short]

    def by_wrong_name(self, name: str) -> list[tuple[str, Fact]]:
        return [(k, f) for k, f in self.facts.items() if name in f.wrong_names]

    def by_text(self, text: str) -> list[tuple[str, Fact]]:
        folded = fold_spacing(text)

        def names(fact: Fact) -> bool:
            if fact.text is not None and fold_spacing(fact.text) == folded:
                return True
            return fact.text_contains is not None and fact.text_contains in folded

        return [(k, f) for k, f in self.facts.items() if names(f)]

    def by_activity(self, wanted: str) -> list[tuple[str, Fact]]:
        return [
            (k, f)
            for k, f in self.facts.items()
            if f.activity is not None and activity_matches(wanted, f.activity, self.package)
        ]


def load_table(pack: TaskPack) -> EvidenceTable | None:
    """The pack's table of record facts (None when the pack has none)."""
    from realbench.safe_yaml import load_yaml_text, read_yaml_file

    if pack.path is None:
        return None
    path = Path(pack.path).parent / EVIDENCE_FILE
    if not path.exists():
        return None
    try:
        return EvidenceTable.model_validate(load_yaml_text(read_yaml_file(path, what="evidence table")))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(
            f"{path}: {where}: {first['msg']}", hint="see docs/real-side.md for the evidence table's form"
        ) from None


@dataclass
class RealStep:
    where: str
    selectors: list[Selector]
    activity: str | None
    evidence: Evidence | None

    @property
    def level(self) -> EvidenceLevel | None:
        return self.evidence.level if self.evidence is not None else None


def _plan_selectors(step: PlanStep) -> list[Selector]:
    out = step.selectors()
    if step.answer is not None and not isinstance(step.answer, str):
        out.append(step.answer.read)
    return out


def _own(evidence: Evidence | None, selectors: list[Selector]) -> Evidence | None:
    return evidence or next((s.evidence for s in selectors if s.evidence is not None), None)


def real_steps(task: Task) -> list[RealStep]:
    """Every real step of a task, in the order the real side runs them."""
    out: list[RealStep] = []
    for i, setup in enumerate(task.real.setup):
        sels = setup.selectors()
        activity = setup.activity if isinstance(setup, WaitForStep) else None
        if sels or activity:
            out.append(RealStep(f"real.setup.{i}", sels, activity, _own(setup.evidence, sels)))
        for j, expect in enumerate(setup.expect):
            out.append(
                RealStep(
                    f"real.setup.{i}.expect.{j}",
                    [expect.selector],
                    None,
                    _own(expect.evidence, [expect.selector]),
                )
            )
    for i, step in enumerate(task.real.golden):
        sels = _plan_selectors(step)
        if sels:
            out.append(RealStep(f"real.golden.{i}", sels, None, _own(step.evidence, sels)))
    for i, check in enumerate(task.real.checks):
        out.append(
            RealStep(f"real.checks.{i}", [check.selector], None, _own(check.evidence, [check.selector]))
        )
    for i, stop in enumerate(task.real.boundary):
        out.append(RealStep(f"real.boundary.{i}", [stop], None, stop.evidence))
    return out


def _names(sel: Selector) -> list[str]:
    out = [v for v in (sel.text, sel.text_contains, sel.content_desc) if v]
    if sel.text_pattern:  # the literal parts of a pattern name what the row must hold
        out += [part for part in sel.text_pattern.split("*") if part and "{" not in part]
    return out


def contradictions(step: RealStep, table: EvidenceTable) -> list[str]:
    """What of one real step the record contradicts."""
    out: list[str] = []
    matched: list[tuple[str, Fact]] = []
    for sel in step.selectors:
        for name in [sel.resource_id, *_names(sel)]:
            if not name:
                continue
            short = name.rsplit("/", 1)[-1]
            for key, fact in table.by_wrong_name(short):
                named = fact.resource_id or fact.text or fact.activity
                out.append(
                    f"{step.where}: `{short}` is not the real {key}: the evidence names it `{named}` "
                    f"[{fact.level.value}] ({fact.source})"
                )
        if sel.resource_id:
            matched += table.by_id(sel.resource_id)
        for text in _names(sel):
            matched += table.by_text(text)
    if step.activity:
        matched += table.by_activity(step.activity)
    level = step.level
    if level is not None and level is not EvidenceLevel.CLONE and matched:
        best = min(matched, key=lambda kf: kf[1].level.rank)
        if level.rank < best[1].level.rank:
            out.append(
                f"{step.where}: claims [{level.value}] but the record has {best[0]} only at "
                f"[{best[1].level.value}] ({best[1].source})"
            )
    elif level is not None and level in SCRIPT_OR_BETTER and not matched:
        unknown = [
            s.resource_id
            for s in step.selectors
            if s.resource_id and not table.by_wrong_name(s.resource_id.rsplit("/", 1)[-1])
        ]
        if unknown:
            out.append(
                f"{step.where}: claims [{level.value}] for `{unknown[0]}`, an id the record does not name"
            )
        elif step.activity:
            out.append(
                f"{step.where}: claims [{level.value}] for activity `{step.activity}`, which the record does not name"
            )
    return out


@dataclass
class TaskEvidence:
    task: str
    real_allowed: bool
    steps: int
    script_or_better: float
    unannotated: int
    guesses: list[str] = field(default_factory=list)
    contradictions: list[str] = field(default_factory=list)
    levels: dict[str, int] = field(default_factory=dict)

    def row(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "real_allowed": self.real_allowed,
            "steps": self.steps,
            "script_or_better": round(self.script_or_better, 4),
            "unannotated": self.unannotated,
            "levels": self.levels,
            "guesses": self.guesses,
            "contradictions": self.contradictions,
        }

    def summary(self) -> str:
        """One line for certify and the run report."""
        levels = ", ".join(f"{n} {k}" for k, n in self.levels.items())
        text = (
            f"{self.script_or_better:.0%} of {self.steps} real steps at script or better ({levels or 'none'})"
        )
        if self.guesses:
            text += f"; {len(self.guesses)} on guesses"
        if self.contradictions:
            text += f"; {len(self.contradictions)} contradiction(s) with the evidence"
        return text


def task_evidence(task: Task, table: EvidenceTable | None) -> TaskEvidence:
    steps = real_steps(task)
    levels: dict[str, int] = {}
    for step in steps:
        key = step.level.value if step.level is not None else "none"
        levels[key] = levels.get(key, 0) + 1
    good = sum(1 for s in steps if s.level in SCRIPT_OR_BETTER)
    found: list[str] = []
    if table is not None:
        for step in steps:
            found += contradictions(step, table)
    return TaskEvidence(
        task=task.id,
        real_allowed=task.real.allowed,
        steps=len(steps),
        script_or_better=good / len(steps) if steps else 0.0,
        unannotated=levels.get("none", 0),
        guesses=[s.where for s in steps if s.level is EvidenceLevel.GUESS],
        contradictions=found,
        levels=dict(sorted(levels.items())),
    )


@dataclass
class PackEvidence:
    pack: str
    has_table: bool
    tasks: list[TaskEvidence]

    @property
    def script_or_better(self) -> float:
        """Over the real steps of the tasks allowed on real phones."""
        allowed = [t for t in self.tasks if t.real_allowed]
        total = sum(t.steps for t in allowed)
        good = sum(round(t.script_or_better * t.steps) for t in allowed)
        return good / total if total else 0.0

    @property
    def contradiction_count(self) -> int:
        return sum(len(t.contradictions) for t in self.tasks)

    def row(self) -> dict[str, Any]:
        return {
            "pack": self.pack,
            "evidence_table": self.has_table,
            "script_or_better": round(self.script_or_better, 4),
            "tasks_on_guesses": [t.task for t in self.tasks if t.guesses],
            "contradictions": self.contradiction_count,
            "tasks": [t.row() for t in self.tasks],
        }


def pack_evidence(pack: TaskPack) -> PackEvidence:
    table = load_table(pack)
    return PackEvidence(
        pack=pack.app, has_table=table is not None, tasks=[task_evidence(t, table) for t in pack.tasks]
    )
