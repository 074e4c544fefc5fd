"""`realbench certify`: does each task's real-side recipe run on each phone of a rig?

For every phone × task: the real setup runs with its checks (through the armed interlock), then
the real golden plan runs with the interlock armed, step by step. Recorded per step: whether the
selector was found and unique, a screenshot and the hierarchy; per task: whether the boundary was
reached (the interlock stopped the commit tap), the real checks held and the answer was readable.
The result is a certification file (JSON) and an HTML page per phone; `realbench run --target
real --certified CERT` then runs only the tasks certified for that phone and app version.

A task is not *runnable* when the pack does not allow it on real phones, it has no real golden
plan, the phone's account cannot instantiate it (fixture gaps), or its manual preconditions were
not confirmed on a physical rig (a virtual phone provisions them).
"""

from __future__ import annotations

import contextlib
import html
import io
import json
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from devices.recipe_runner import SetupFailed, StepRecord
from realbench.actions import Answer, Click, Terminate, Wait
from realbench.errors import BoundaryBlocked, ConfigError, DeviceError, RealbenchError
from realbench.evidence_report import load_table, task_evidence
from realbench.golden import GoldenAgent, PlanError, to_normalised
from realbench.hierarchy import Hierarchy
from realbench.recipes import fixture_gaps
from realbench.taskpack import CheckExpect, Popup, Task, TaskInstance, TaskPack, fixture_choices

log = logging.getLogger(__name__)

STEP_TIMEOUT_S = 6.0
MAX_ACTIONS_PER_STEP = 60
THUMB_WIDTH = 270
CERT_FILE = "certification.json"
# A runnable task failed to certify; configuration errors exit 2 (ConfigError) before certifying.
CERTIFY_FAILED_EXIT = 1


class CertStep(BaseModel):
    phase: str
    index: int
    kind: str
    selector: str = ""
    found: bool | None = None
    unique: bool | None = None
    ok: bool = True
    detail: str = ""
    screenshot: str | None = None
    hierarchy: str | None = None


class CertResult(BaseModel):
    task: str
    phone: str
    app_version: str | None = None
    runnable: bool
    certified: bool = False
    failed_step: str | None = None
    failed_selector: str | None = None
    reason: str = ""
    boundary_reached: bool | None = None
    checks_held: bool | None = None
    answer_readable: bool | None = None
    answer: str | None = None
    manual: list[str] = Field(default_factory=list)
    unmatched: list[str] = Field(default_factory=list)
    steps: list[CertStep] = Field(default_factory=list)
    took_s: float = 0.0
    # what public evidence backs the task's real steps (`check-pack --evidence`), one line
    evidence: str = ""

    def row(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "phone": self.phone,
            "runnable": self.runnable,
            "certified": self.certified,
            "failed_step": self.failed_step,
            "reason": self.reason,
            "evidence": self.evidence,
        }


class PhoneCert(BaseModel):
    serial: str
    label: str = ""
    virtual: bool = False
    app_version: str | None = None


class Certificate(BaseModel):
    """What certify found; `run --certified` reads it."""

    pack: str
    app: str
    package: str
    pack_app_version: str | None = None
    rig: str
    created: str
    confirm_manual: bool = False
    phones: list[PhoneCert] = Field(default_factory=list)
    results: list[CertResult] = Field(default_factory=list)

    def certified_for(self, serial: str, app_version: str | None) -> set[str]:
        """Tasks certified on this phone, for this app version (another version: none)."""
        phone = next((p for p in self.phones if p.serial == serial), None)
        if phone is None or phone.app_version is None or phone.app_version != app_version:
            return set()
        return {r.task for r in self.results if r.phone == serial and r.certified}

    def why_not_certified(self, serial: str, app_version: str | None, task: str) -> str:
        """Why `certified_for(serial, app_version)` does not hold `task`, in a few words."""
        phone = next((p for p in self.phones if p.serial == serial), None)
        if phone is None:
            return "the phone was not certified"
        if phone.app_version is None or phone.app_version != app_version:
            return f"certified at app version {phone.app_version}, the phone has {app_version}"
        row = next((r for r in self.results if r.phone == serial and r.task == task), None)
        if row is None:
            return "the task was not certified on this phone"
        if not row.runnable:
            return f"not runnable: {row.reason}"
        return f"failed at {row.failed_step}: {row.reason}" if not row.certified else "certified"

    def failed(self) -> list[CertResult]:
        """Runnable tasks that did not certify (tasks that are not runnable are skipped, not failed)."""
        return [r for r in self.results if r.runnable and not r.certified]

    def exit_code(self) -> int:
        """`realbench certify`'s exit status: 0 when every runnable task certified on every phone."""
        return CERTIFY_FAILED_EXIT if self.failed() else 0

    def summary(self) -> dict[str, Any]:
        rows = [r.row() for r in self.results]
        return {"tasks": rows, "certified": sum(r["certified"] for r in rows), "total": len(rows)}

    def write(self, out: Path) -> Path:
        out.mkdir(parents=True, exist_ok=True)
        path = out / CERT_FILE
        path.write_text(self.model_dump_json(indent=1), encoding="utf-8")
        return path


def load_certificate(path: Path) -> Certificate:
    p = path / CERT_FILE if path.is_dir() else path
    if not p.exists():
        raise ConfigError(
            f"no certification file at {p}", hint="run `realbench certify --rig R --pack P --out DIR`"
        )
    return Certificate.model_validate_json(p.read_text(encoding="utf-8"))


# --- what is runnable ---------------------------------------------------------------------------


def not_runnable_reason(task: Task, fixture: Any, *, virtual: bool, confirm_manual: bool) -> str | None:
    """Why a task cannot be certified on this phone (None: it can be tried)."""
    allowed = getattr(task.real, "allowed", True)
    if allowed is False:
        return f"not allowed on real phones: {getattr(task.real, 'why', '') or 'the pack says so'}"
    if not task.real.golden:
        why = task.real.unmatched[0] if task.real.unmatched else "the task has no real golden plan"
        return why
    gaps = fixture_gaps(task.real.fixtures, fixture_choices(task), fixture)
    if gaps:
        return "the account cannot instantiate it: " + "; ".join(gaps)
    if task.real.manual and not virtual and not confirm_manual:
        return "manual preconditions not confirmed (--confirm-manual): " + " / ".join(task.real.manual)
    return None


# --- running one task ---------------------------------------------------------------------------


class _Recorder:
    """Writes each step's screenshot (a thumbnail) and hierarchy under the phone's folder."""

    def __init__(self, root: Path, serial: str, task: str) -> None:
        self.dir = root / _safe(serial) / task
        self.rel = Path(_safe(serial)) / task
        self.dir.mkdir(parents=True, exist_ok=True)

    def save(
        self, name: str, screenshot: bytes | None, hierarchy: str | None
    ) -> tuple[str | None, str | None]:
        shot = xml = None
        if screenshot:
            with contextlib.suppress(Exception):
                from PIL import Image

                img = Image.open(io.BytesIO(screenshot)).convert("RGB")
                img.thumbnail((THUMB_WIDTH, THUMB_WIDTH * 4))
                img.save(self.dir / f"{name}.jpg", quality=70)
                shot = str(self.rel / f"{name}.jpg")
        if hierarchy:
            (self.dir / f"{name}.xml").write_text(hierarchy, encoding="utf-8")
            xml = str(self.rel / f"{name}.xml")
        return shot, xml


def _safe(serial: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in serial)


def _setup_steps(records: list[StepRecord], rec: _Recorder) -> list[CertStep]:
    out = []
    for r in records:
        shot, xml = rec.save(f"setup_{r.index:02d}", r.screenshot, r.hierarchy)
        out.append(
            CertStep(
                phase="setup",
                index=r.index,
                kind=r.kind,
                selector=r.selector,
                found=r.found,
                unique=r.unique,
                ok=r.ok,
                detail=r.detail,
                screenshot=shot,
                hierarchy=xml,
            )
        )
    return out


def _dismiss_popup(
    device: Any, hierarchy: Hierarchy | None, popups: Sequence[Popup], size: tuple[int, int]
) -> str | None:
    """A pack pop-up rule's tap for a pop-up that covers the screen (a dialog that appears after a
    step, not only at launch), sent through the armed interlock like any step; its name, or None."""
    if hierarchy is None:
        return None
    for popup in popups:
        if hierarchy.find_one(popup.when) is None:
            continue
        button = hierarchy.find_one(popup.tap)
        if button is None:
            return None
        x, y = to_normalised(*button.bounds.center, *size)
        device.act(Click(x=x, y=y))
        return popup.name
    return None


def run_real_golden(
    device: Any,
    instance: TaskInstance,
    rec: _Recorder,
    result: CertResult,
    size: tuple[int, int],
    popups: Sequence[Popup] = (),
) -> None:
    """The real golden plan, one step at a time, through the armed interlock. A step whose control
    is missing behind one of the pack's pop-ups has the pop-up dismissed by its rule first."""
    plan = instance.task.real.golden
    task = instance.task
    for i, step in enumerate(plan):
        one = instance.model_copy(update={"task": task.model_copy(update={"golden": [step]})})
        agent = GoldenAgent()
        agent.reset(one)
        cert = CertStep(phase="golden", index=i, kind=step.kind)
        sels = step.selectors() + (
            [step.answer.read] if step.answer is not None and not isinstance(step.answer, str) else []
        )
        if sels:
            cert.selector = str(sels[0].format(instance.params))
        result.steps.append(cert)
        deadline = time.monotonic() + STEP_TIMEOUT_S
        for _ in range(MAX_ACTIONS_PER_STEP):
            obs = device.observe()
            hierarchy = Hierarchy(obs.hierarchy) if obs.hierarchy else None
            if sels and hierarchy is not None and cert.found is not True:
                n = len(hierarchy.find(sels[0].format(instance.params)))
                cert.found, cert.unique = n > 0, n == 1
            if cert.screenshot is None and (cert.found or not sels):
                cert.screenshot, cert.hierarchy = rec.save(
                    f"golden_{i:02d}", obs.screenshot.data, obs.hierarchy
                )
            try:
                action = agent.next_action(obs)
            except PlanError as exc:
                if time.monotonic() < deadline and "no control matches" in exc.message:
                    try:
                        dismissed = _dismiss_popup(device, hierarchy, popups, size)
                    except BoundaryBlocked as blocked:
                        dismissed = None
                        log.warning("pop-up rule refused by the interlock: %s", blocked.message)
                    if dismissed is not None:
                        cert.detail = f"dismissed the pop-up {dismissed}"
                    agent.reset(one)
                    time.sleep(0.3)
                    continue
                cert.ok, cert.detail = False, exc.message
                if cert.screenshot is None:
                    cert.screenshot, cert.hierarchy = rec.save(
                        f"golden_{i:02d}", obs.screenshot.data, obs.hierarchy
                    )
                result.failed_step, result.failed_selector = f"golden.{i}", cert.selector or None
                result.reason = f"real golden step {i} ({step.kind}): {exc.message}"
                return
            if isinstance(action, Wait):
                time.sleep(action.seconds)
                continue
            if isinstance(action, Terminate):
                break
            if isinstance(action, Answer):
                result.answer = action.text
                result.answer_readable = bool(action.text.strip())
                break
            try:
                device.act(action)
            except BoundaryBlocked as exc:
                cert.detail = f"stopped by the interlock at {exc.control}"
                if i == len(plan) - 1 and task.real.boundary:
                    result.boundary_reached = True  # the plan's last step is its commit tap
                    return
                # Any earlier refusal is a false block of the golden plan (or a plan that
                # reaches a stop control early): the task is not certified.
                cert.ok = False
                result.failed_step, result.failed_selector = f"golden.{i}", cert.selector or None
                result.reason = f"real golden step {i} ({step.kind}) refused by the interlock: {exc.message}"
                return
            if agent.remaining == 0:
                break  # the step is done; the next step looks at the screen itself
        else:
            cert.ok, cert.detail = False, "the step did not finish"
            result.failed_step, result.failed_selector = f"golden.{i}", cert.selector or None
            result.reason = f"real golden step {i} ({step.kind}) did not finish"
            return


def _checks(device: Any, instance: TaskInstance) -> tuple[bool, str]:
    checks = instance.task.real.checks
    if not checks:
        return True, ""
    obs = device.observe()
    hierarchy = Hierarchy(obs.hierarchy or "<hierarchy/>")
    for check in checks:
        found = hierarchy.find_one(check.selector.format(instance.params)) is not None
        if found != (check.expect is CheckExpect.EXISTS):
            return False, f"real check failed: {check.selector.format(instance.params)} {check.expect.value}"
    return True, ""


def certify_task(target: Any, task: Task, seed: int, out: Path, serial: str) -> CertResult:
    result = CertResult(
        task=task.id,
        phone=serial,
        runnable=True,
        manual=list(task.real.manual),
        unmatched=list(task.real.unmatched),
    )
    t0 = time.perf_counter()
    rec = _Recorder(out, serial, task.id)
    instance = target.instantiate(task, seed)
    inner = None
    try:
        try:
            target.setup(instance)
        finally:
            inner = target._inner
            if inner is not None:
                result.steps += _setup_steps(inner.setup_records, rec)
        device = target.device
        pack = getattr(target, "pack", None) or getattr(inner, "pack", None)
        popups = pack.real_app.popups if pack is not None else []
        run_real_golden(device, instance, rec, result, inner.phone.size() if inner else (1080, 2400), popups)
        if result.failed_step is None:
            held, why = _checks(device, instance)
            result.checks_held = held
            if not held:
                result.failed_step, result.reason = "checks", why
    except SetupFailed as exc:
        result.failed_step = f"setup.{exc.step}"
        result.failed_selector = exc.selector or None
        result.reason = exc.message
    except (DeviceError, RealbenchError) as exc:
        result.failed_step = result.failed_step or "environment"
        result.reason = f"environment: {exc.message}"
    finally:
        target.teardown()
    if result.failed_step is None:
        result.certified = _complete(task, result)
    result.app_version = _version(target)
    result.took_s = round(time.perf_counter() - t0, 2)
    return result


def _complete(task: Task, result: CertResult) -> bool:
    if task.real.boundary and not result.boundary_reached:
        result.failed_step = "boundary"
        result.reason = "the plan ended without reaching the commit boundary"
        return False
    if any(s.answer is not None for s in task.real.golden) and not result.answer_readable:
        result.failed_step = "answer"
        result.reason = "the answer could not be read"
        return False
    return True


def _version(target: Any) -> str | None:
    with contextlib.suppress(Exception):
        return str(target.pool.phone(target.serial).app_version(target.pack.real_app.package))
    return None


# --- the whole rig ------------------------------------------------------------------------------


@contextlib.contextmanager
def _real_targets(rig: Any, pack: TaskPack, phones: Any = None) -> Iterator[list[Any]]:
    from devices.farm.rig_targets import targets_from_rig

    with targets_from_rig(rig, pack, "real", phones=phones) as targets:
        for t in targets:
            t._target().record_setup = True
        yield targets


def certify(
    rig: Any,
    pack: TaskPack,
    out: Path,
    *,
    task_ids: list[str] | None = None,
    confirm_manual: bool = False,
    seed: int = 0,
    phones: Any = None,
) -> Certificate:
    tasks = [pack.task(t) for t in task_ids] if task_ids else list(pack.tasks)
    table = load_table(pack)
    evidence = {t.id: task_evidence(t, table).summary() for t in tasks}
    out.mkdir(parents=True, exist_ok=True)
    cert = Certificate(
        pack=pack.path or pack.app,
        app=pack.app,
        package=pack.real_app.package,
        pack_app_version=pack.real_app.version,
        rig=getattr(rig, "name", str(rig)),
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        confirm_manual=confirm_manual,
    )
    lock = threading.Lock()
    with _real_targets(rig, pack, phones) as targets:

        def one_phone(target: Any) -> None:
            rec = target.pool.record(target.serial)
            account = target.account()
            fixture = account.fixture if account else None
            version = _version(target)
            with lock:
                cert.phones.append(
                    PhoneCert(
                        serial=target.serial, label=rec.spec.label, virtual=rec.virtual, app_version=version
                    )
                )
            for task in tasks:
                why = not_runnable_reason(task, fixture, virtual=rec.virtual, confirm_manual=confirm_manual)
                if why is not None:
                    res = CertResult(
                        task=task.id, phone=target.serial, runnable=False, reason=why, app_version=version
                    )
                else:
                    res = certify_task(target, task, seed, out, target.serial)
                res.evidence = evidence[task.id]
                log.info("certify %s %s: %s %s", target.serial, task.id, res.certified, res.reason)
                with lock:
                    cert.results.append(res)

        with ThreadPoolExecutor(max_workers=max(1, len(targets))) as pool:
            list(pool.map(one_phone, targets))
    order = {t.id: i for i, t in enumerate(tasks)}
    cert.results.sort(key=lambda r: (r.phone, order.get(r.task, 0)))
    cert.write(out)
    for phone in cert.phones:
        write_phone_page(cert, phone, out)
    return cert


# --- the HTML page per phone ------------------------------------------------------------------


def write_phone_page(cert: Certificate, phone: PhoneCert, out: Path) -> Path:
    esc = html.escape
    rows = [r for r in cert.results if r.phone == phone.serial]
    ok = sum(r.certified for r in rows)
    parts = [
        "<!doctype html><meta charset='utf-8'>",
        f"<title>certify {esc(cert.app)} on {esc(phone.serial)}</title>",
        "<style>body{font:14px sans-serif;margin:1.5em}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 6px;vertical-align:top}.ok{background:#e6f7e6}"
        ".bad{background:#fde8e8}.skip{color:#777}img{width:90px;border:1px solid #ddd}</style>",
        f"<h1>{esc(cert.app)} on {esc(phone.serial)} {esc(phone.label)}</h1>",
        f"<p>{'virtual phone (a test rig, not a phone)' if phone.virtual else 'phone'} · app "
        f"{esc(cert.package)} {esc(str(phone.app_version))} (pack pins {esc(str(cert.pack_app_version))}) · "
        f"rig {esc(cert.rig)} · {esc(cert.created)} · certified {ok} of {len(rows)}</p>",
        "<table><tr><th>task</th><th>status</th><th>failed step</th><th>reason</th><th>steps</th></tr>",
    ]
    for r in rows:
        cls = "ok" if r.certified else ("bad" if r.runnable else "skip")
        status = "certified" if r.certified else ("failed" if r.runnable else "not runnable")
        steps = []
        for s in r.steps:
            mark = "✓" if s.ok else "✗"
            found = (
                ""
                if s.found is None
                else (" unique" if s.unique else (" found ×n" if s.found else " not found"))
            )
            img = (
                f"<a href='{esc(s.hierarchy or '')}'><img src='{esc(s.screenshot)}'></a>"
                if s.screenshot
                else ""
            )
            steps.append(
                f"<div>{mark} {esc(s.phase)}.{s.index} {esc(s.kind)} {esc(s.selector)}{found} {esc(s.detail)} {img}</div>"
            )
        extra = []
        if r.boundary_reached:
            extra.append("boundary reached")
        if r.answer is not None:
            extra.append(f"answer {esc(r.answer)!s}")
        if r.unmatched:
            extra.append("unmatched: " + esc("; ".join(r.unmatched)))
        if r.evidence:
            extra.append("evidence: " + esc(r.evidence))
        parts.append(
            f"<tr class='{cls}'><td>{esc(r.task)}</td><td>{status}</td><td>{esc(r.failed_step or '')}</td>"
            f"<td>{esc(r.reason)}<br><small>{'<br>'.join(extra)}</small></td><td>{''.join(steps)}</td></tr>"
        )
    parts.append("</table>")
    path = out / f"{_safe(phone.serial)}.html"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def print_json(cert: Certificate) -> str:
    return json.dumps(cert.summary(), ensure_ascii=False)


def certify_command(
    *, rig: Path, pack: Path, tasks: str | None, out: Path | None, confirm_manual: bool, seed: int = 0
) -> Certificate:
    """The body of `realbench certify`."""
    from devices.pack_run import parse_task_selection
    from devices.rig import load_rig
    from realbench.taskpack import load_pack

    loaded = load_pack(pack)
    rig_obj = load_rig(rig)
    out_dir = out or Path("runs") / f"certify-{rig_obj.name}-{loaded.app}"
    return certify(
        rig_obj,
        loaded,
        out_dir,
        task_ids=parse_task_selection(tasks),
        confirm_manual=confirm_manual,
        seed=seed,
    )
