"""The recorder: operator actions on the phone page become typed real-side recipe steps.

While recording, each action sent through the console becomes one step with the most stable
selector for the node it landed on (read from the hierarchy just before it was sent). The operator
marks each step's role: `setup` (a recipe setup step), `golden` (a golden-plan step), `boundary`
(the commit tap the plan ends on: a tap the interlock blocked while recording is taken as one),
`check` (a control that must be on screen: an `expect` of the setup step before it) or `answer`
(an answer read off a node). The result is previewed as YAML and written as the real side of a
chosen task in the format `realbench certify` runs: the pack's `real.yaml` (patched, with a backup
of the previous file) or a new recipes file.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import threading
import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml
from pydantic import TypeAdapter, ValidationError

from realbench.actions import Action, Click, Key, KeyPress, LongPress, Swipe, Type
from realbench.console.phones import ConsolePhones
from realbench.console.selectors import choose_selector, node_at
from realbench.errors import BoundaryBlocked, ConfigError
from realbench.hierarchy import Hierarchy
from realbench.recipe_file import write_task_recipe
from realbench.recipes import RECIPES_FILE, SetupStep
from realbench.taskpack import PlanStep, load_pack, pack_file

log = logging.getLogger(__name__)

_SETUP: TypeAdapter[Any] = TypeAdapter(SetupStep)


class Phase(StrEnum):
    SETUP = "setup"
    GOLDEN = "golden"
    BOUNDARY = "boundary"
    CHECK = "check"
    ANSWER = "answer"


class StepKind(StrEnum):
    LAUNCH = "launch"
    TAP = "tap"
    LONG_PRESS = "long_press"
    TYPE = "type"
    SWIPE = "swipe"
    BACK = "back"
    HOME = "home"
    POINT = "point"  # a node pointed at (check or answer read), nothing sent


@dataclass
class RecordedStep:
    kind: StepKind
    phase: Phase
    selector: dict[str, Any] | None = None
    selector_kind: str = ""
    unique: bool = True
    text: str = ""
    package: str = ""
    direction: str = ""
    regex: str = ""

    def to_dict(self, index: int) -> dict[str, Any]:
        return {
            "index": index,
            "kind": str(self.kind),
            "phase": str(self.phase),
            "selector": self.selector,
            "selector_kind": self.selector_kind,
            "unique": self.unique,
            "text": self.text,
            "package": self.package,
            "direction": self.direction,
            "regex": self.regex,
        }


@dataclass
class Recording:
    pack: Path
    task: str
    steps: list[RecordedStep] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    pending: RecordedStep | None = None
    default_phase: Phase = Phase.SETUP
    # Steps changed since the recording was last written: Stop keeps them unless told to discard.
    unwritten: bool = False


class UnwrittenRecording(ConfigError):
    """Stop was asked of a recording whose steps were never written."""


def _swipe_direction(a: Swipe) -> str:
    dx, dy = a.x2 - a.x, a.y2 - a.y
    if abs(dy) >= abs(dx):
        return "up" if dy < 0 else "down"
    return "left" if dx < 0 else "right"


class Recorder:
    def __init__(self, phones: ConsolePhones, *, data_dir: Path, packs: list[Path]) -> None:
        self.phones = phones
        self.data_dir = data_dir
        # Only these packs are written to; new recipe files go under data_dir/recipes.
        self.packs = {pack_file(p).parent.resolve(): load_pack(p) for p in packs}
        self._recordings: dict[str, Recording] = {}
        self._lock = threading.Lock()

    # --- recording ----------------------------------------------------------------------------

    def pack_choices(self) -> list[dict[str, Any]]:
        return [
            {"path": str(p), "app": pack.app, "tasks": [t.id for t in pack.tasks]}
            for p, pack in self.packs.items()
        ]

    def start(self, serial: str, pack: str, task: str) -> Recording:
        path = pack_file(pack).parent.resolve()
        if path not in self.packs:
            path = next((p for p, k in self.packs.items() if k.app == pack), path)
        if path not in self.packs:
            raise ConfigError(f"{pack} is not one of the console's packs", hint="pass it with --pack")
        loaded = load_pack(path)
        if task not in {t.id for t in loaded.tasks}:
            raise ConfigError(f"pack {path} has no task {task!r}", hint="pick one of the pack's task ids")
        self.phones.pool.record(serial)
        with self._lock:
            rec = Recording(pack=path, task=task)
            self._recordings[serial] = rec
            return rec

    def stop(self, serial: str, *, discard: bool = False) -> None:
        """End the recording. One with unwritten steps is kept (UnwrittenRecording) unless
        `discard` says the operator chose to throw them away."""
        with self._lock:
            rec = self._recordings.get(serial)
            if rec is not None and rec.unwritten and rec.steps and not discard:
                raise UnwrittenRecording(
                    f"the recording of {rec.task} has {len(rec.steps)} unwritten steps; it is kept",
                    hint="write the recipe first, or stop again choosing to discard them",
                )
            self._recordings.pop(serial, None)

    def recording(self, serial: str) -> Recording | None:
        return self._recordings.get(serial)

    def _selector_at(self, serial: str, x: int, y: int) -> tuple[dict[str, Any] | None, str, bool]:
        phone = self.phones.pool.phone(serial)
        tree = Hierarchy(self.phones.hierarchy(serial))
        px, py = phone.to_pixels(x, y)
        node = node_at(tree, px, py)
        if node is None:
            return None, "", False
        choice = choose_selector(tree, node)
        return choice.selector.model_dump(exclude_defaults=True), str(choice.kind), choice.unique

    def _focused_selector(self, serial: str) -> dict[str, Any] | None:
        tree = Hierarchy(self.phones.hierarchy(serial))
        node = tree.focused()
        return choose_selector(tree, node).selector.model_dump(exclude_defaults=True) if node else None

    def before_action(self, serial: str, action: Action) -> None:
        """Read what the action is about to touch (the screen changes once it is sent)."""
        rec = self.recording(serial)
        if rec is None:
            return
        step: RecordedStep | None = None
        if isinstance(action, Click | LongPress):
            sel, kind, unique = self._selector_at(serial, action.x, action.y)
            step = RecordedStep(
                StepKind.TAP if isinstance(action, Click) else StepKind.LONG_PRESS,
                rec.default_phase,
                sel,
                kind,
                unique,
            )
        elif isinstance(action, Type):
            step = RecordedStep(
                StepKind.TYPE, rec.default_phase, self._focused_selector(serial), text=action.text
            )
        elif isinstance(action, Swipe):
            step = RecordedStep(StepKind.SWIPE, rec.default_phase, direction=_swipe_direction(action))
        elif isinstance(action, KeyPress) and action.key in (Key.BACK, Key.HOME):
            step = RecordedStep(StepKind.BACK if action.key is Key.BACK else StepKind.HOME, rec.default_phase)
        elif isinstance(action, KeyPress):
            rec.notes.append(f"not recorded: key {action.key} (no recipe step for it)")
        rec.pending = step

    def after_action(self, serial: str, error: Exception | None) -> None:
        rec = self.recording(serial)
        if rec is None or rec.pending is None:
            return
        step, rec.pending = rec.pending, None
        if error is None:
            rec.steps.append(step)
            rec.unwritten = True
        elif isinstance(error, BoundaryBlocked) and step.kind is StepKind.TAP:
            # The tap the plan must reach and never send.
            step.phase = Phase.BOUNDARY
            rec.steps.append(step)
            rec.unwritten = True

    def opened(self, serial: str, package: str) -> None:
        rec = self.recording(serial)
        if rec is not None:
            rec.steps.append(RecordedStep(StepKind.LAUNCH, Phase.SETUP, package=package))
            rec.unwritten = True

    def point(self, serial: str, x: int, y: int, phase: Phase, regex: str = "") -> None:
        rec = self._need(serial)
        if phase not in (Phase.CHECK, Phase.ANSWER):
            raise ConfigError("a pointed-at node is a check or an answer read")
        sel, kind, unique = self._selector_at(serial, x, y)
        if sel is None:
            raise ConfigError("no node there")
        rec.steps.append(RecordedStep(StepKind.POINT, phase, sel, kind, unique, regex=regex))
        rec.unwritten = True

    def mark(self, serial: str, index: int, phase: Phase | None, *, delete: bool = False) -> None:
        rec = self._need(serial)
        if not 0 <= index < len(rec.steps):
            raise ConfigError(f"no step {index}")
        rec.unwritten = True
        if delete:
            rec.steps.pop(index)
            return
        assert phase is not None
        step = rec.steps[index]
        if step.kind is StepKind.POINT and phase not in (Phase.CHECK, Phase.ANSWER):
            raise ConfigError("a pointed-at node can only be a check or an answer read")
        if phase in (Phase.CHECK, Phase.ANSWER) and step.selector is None:
            raise ConfigError("this step has no node to check or read")
        step.phase = phase

    def set_default(self, serial: str, phase: Phase) -> None:
        if phase not in (Phase.SETUP, Phase.GOLDEN):
            raise ConfigError("new steps default to setup or golden")
        self._need(serial).default_phase = phase

    def _need(self, serial: str) -> Recording:
        rec = self.recording(serial)
        if rec is None:
            raise ConfigError(f"not recording on {serial}", hint="start a recording first")
        return rec

    # --- the recipe -------------------------------------------------------------------------------

    def recipe(self, serial: str) -> tuple[dict[str, Any], list[str]]:
        """(the task's recipe: setup and golden, problems) — problems name what cannot be written."""
        rec = self._need(serial)
        setup: list[dict[str, Any]] = []
        golden: list[dict[str, Any]] = []
        problems: list[str] = []
        for i, s in enumerate(rec.steps):
            where = f"step {i} ({s.kind}, {s.phase})"
            if s.selector is not None and not s.unique:
                problems.append(f"{where}: selector {s.selector} is not unique on its screen (positional)")
            if s.phase is Phase.CHECK:
                expect = {"selector": s.selector}
                if setup:
                    setup[-1].setdefault("expect", []).append(expect)
                else:
                    setup.append({"do": "wait_for", "selector": s.selector})
                continue
            if s.phase is Phase.ANSWER:
                read: dict[str, Any] = {"read": s.selector}
                if s.regex:
                    read["regex"] = s.regex
                golden.append({"answer": read})
                continue
            if s.phase is Phase.SETUP:
                step = self._setup_step(s)
                if step is None:
                    problems.append(
                        f"{where}: a {s.kind} has no setup step form; mark it golden or delete it"
                    )
                else:
                    setup.append(step)
                continue
            plan = self._plan_step(s)
            if plan is None:
                problems.append(f"{where}: a {s.kind} has no golden-plan form")
            else:
                golden.append(plan)
        boundaries = [s for s in rec.steps if s.phase is Phase.BOUNDARY]
        if (
            boundaries
            and rec.steps[-1].phase not in (Phase.BOUNDARY,)
            and golden
            and "answer" not in golden[-1]
        ):
            problems.append("the golden plan continues after its commit boundary")
        recipe: dict[str, Any] = {"setup": setup, "golden": golden}
        for i, st in enumerate(setup):
            try:
                _SETUP.validate_python(st)
            except ValidationError as exc:
                problems.append(f"setup {i}: {exc.errors()[0]['msg']}")
        for i, st in enumerate(golden):
            try:
                PlanStep.model_validate(st)
            except ValidationError as exc:
                problems.append(f"golden {i}: {exc.errors()[0]['msg']}")
        return recipe, problems

    @staticmethod
    def _setup_step(s: RecordedStep) -> dict[str, Any] | None:
        if s.kind is StepKind.LAUNCH:
            return {"do": "launch"}
        if s.kind is StepKind.TAP and s.selector:
            return {"do": "tap", "selector": s.selector}
        if s.kind is StepKind.TYPE:
            return {"do": "type", "text": s.text, **({"into": s.selector} if s.selector else {})}
        if s.kind is StepKind.BACK:
            return {"do": "back"}
        if s.kind is StepKind.HOME:
            return {"do": "home"}
        return None

    @staticmethod
    def _plan_step(s: RecordedStep) -> dict[str, Any] | None:
        if s.kind in (StepKind.TAP,) and s.selector:
            return {"tap": s.selector}
        if s.kind is StepKind.LONG_PRESS and s.selector:
            return {"long_press": s.selector}
        if s.kind is StepKind.TYPE:
            return {"type": {"text": s.text, "into": s.selector} if s.selector else s.text}
        if s.kind is StepKind.SWIPE:
            return {"swipe": {"direction": s.direction}}
        if s.kind is StepKind.BACK:
            return {"key": "back"}
        if s.kind is StepKind.HOME:
            return {"key": "home"}
        if s.kind is StepKind.LAUNCH:
            return None
        return None

    def preview(self, serial: str) -> dict[str, Any]:
        rec = self._need(serial)
        recipe, problems = self.recipe(serial)
        text = yaml.safe_dump({"tasks": {rec.task: recipe}}, allow_unicode=True, sort_keys=False)
        boundary = [s.selector for s in rec.steps if s.phase is Phase.BOUNDARY]
        pack = load_pack(rec.pack)
        task = next(t for t in pack.tasks if t.id == rec.task)
        declared = [b.model_dump(exclude_defaults=True, exclude={"evidence"}) for b in task.real.boundary]
        missing = [b for b in boundary if b not in declared]
        notes = list(rec.notes)
        if missing:
            notes.append(
                f"the pack's real.boundary of {rec.task} does not name {missing}: add it there "
                "(the recipe's last tap is the boundary the interlock must stop)"
            )
        return {
            "pack": str(rec.pack),
            "task": rec.task,
            "steps": [s.to_dict(i) for i, s in enumerate(rec.steps)],
            "yaml": text,
            "problems": problems,
            "notes": notes,
            "default_phase": str(rec.default_phase),
        }

    def write(self, serial: str, *, new_file: Path | None = None, force: bool = False) -> dict[str, Any]:
        """Write the recipe: into a new recipes file, or into the pack's real.yaml (the previous
        file kept as a timestamped backup). The pack must still load afterwards, else the old
        file is put back."""
        rec = self._need(serial)
        recipe, problems = self.recipe(serial)
        if problems and not force:
            raise ConfigError(
                "the recording has problems: " + "; ".join(problems), hint="fix them or write anyway"
            )
        if new_file is not None:
            if new_file.is_absolute() or ".." in new_file.parts:
                raise ConfigError("a new recipes file is named relative to the console's recipes folder")
            new_file = self.data_dir / "recipes" / new_file
            if new_file.exists():
                raise ConfigError(f"{new_file} exists", hint="choose a new file, or patch the pack")
            app = load_pack(rec.pack).app
            new_file.parent.mkdir(parents=True, exist_ok=True)
            new_file.write_text(
                "# Real-side recipe recorded with the realbench console.\n"
                + yaml.safe_dump(
                    {"app": app, "tasks": {rec.task: recipe}}, allow_unicode=True, sort_keys=False
                ),
                encoding="utf-8",
            )
            rec.unwritten = False
            return {"path": str(new_file), "backup": None}
        target = rec.pack / RECIPES_FILE
        backup: Path | None = None
        if target.exists():
            backup = target.with_name(f"{RECIPES_FILE}.bak-{time.strftime('%Y%m%d-%H%M%S')}")
            shutil.copy2(target, backup)
        # Only this task's lines change: the file is hand-maintained and shared.
        write_task_recipe(target, rec.task, recipe, app=load_pack(rec.pack).app)
        try:
            load_pack(rec.pack)
        except ConfigError:
            if backup is not None:
                shutil.copy2(backup, target)
            else:
                with contextlib.suppress(OSError):
                    target.unlink()
            raise
        log.info("recorded recipe of %s written to %s (backup %s)", rec.task, target, backup)
        rec.unwritten = False
        return {"path": str(target), "backup": str(backup) if backup else None}

    # --- routes -----------------------------------------------------------------------------------

    def routes(self, guarded: Any, read_json: Any, call: Any) -> list[Any]:
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response
        from starlette.routing import Route

        async def status(request: Request) -> Response:
            serial = request.path_params["serial"]
            if self.recording(serial) is None:
                return JSONResponse({"recording": False})
            return JSONResponse({"recording": True, **(await call(self.preview, serial))})

        async def start(request: Request) -> Response:
            data = await read_json(request)
            serial = request.path_params["serial"]
            await call(self.start, serial, str(data.get("pack", "")), str(data.get("task", "")))
            return JSONResponse({"recording": True, **(await call(self.preview, serial))})

        async def stop(request: Request) -> Response:
            data = await read_json(request)
            serial = request.path_params["serial"]
            try:
                self.stop(serial, discard=data.get("discard") is True)
            except UnwrittenRecording as exc:
                body = {"error": exc.message, "hint": exc.hint, "unwritten": True, "recording": True}
                return JSONResponse({**body, **(await call(self.preview, serial))}, status_code=409)
            return JSONResponse({"recording": False})

        async def edit(request: Request) -> Response:
            data = await read_json(request)
            serial = request.path_params["serial"]
            op = data.get("op")
            try:
                if op == "mark":
                    self.mark(serial, int(data["index"]), Phase(data["phase"]))
                elif op == "delete":
                    self.mark(serial, int(data["index"]), None, delete=True)
                elif op == "point":
                    await call(
                        self.point,
                        serial,
                        int(data["x"]),
                        int(data["y"]),
                        Phase(data["phase"]),
                        str(data.get("regex") or ""),
                    )
                elif op == "default":
                    self.set_default(serial, Phase(data["phase"]))
                else:
                    raise ConfigError(f"unknown recorder operation {op!r}")
            except (KeyError, ValueError) as exc:
                raise ConfigError(f"bad recorder request: {exc}") from None
            return JSONResponse({"recording": True, **(await call(self.preview, serial))})

        async def write(request: Request) -> Response:
            data = await read_json(request)
            serial = request.path_params["serial"]
            new_file = Path(data["new_file"]) if data.get("new_file") else None
            result = await call(self.write, serial, new_file=new_file, force=bool(data.get("force")))
            return JSONResponse(result)

        base = "/api/phones/{serial}/recorder"
        return [
            Route(base, guarded(status)),
            Route(base + "/start", guarded(start), methods=["POST"]),
            Route(base + "/stop", guarded(stop), methods=["POST"]),
            Route(base + "/edit", guarded(edit), methods=["POST"]),
            Route(base + "/write", guarded(write), methods=["POST"]),
        ]
