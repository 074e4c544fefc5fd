"""Builds the targets a run needs and runs a pack on them (the body of `realbench run`).

`clone` targets are headless clone pages served by an in-process clone server (or a running one
with --server-url); `real` and `clone-on-phone` targets come from a rig's phones through the farm.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from realbench.agent import Agent
from realbench.device import Target, TargetKind
from realbench.errors import ConfigError, RunInterrupted, UnknownNameError
from realbench.golden import GoldenAgent
from realbench.real_allowed import SkippedTask, split_real_allowed
from realbench.run_config import RunConfig
from realbench.runner import (
    LocalRunner,
    default_run_id,
    pending_items,
    plan_episodes,
    run_summary,
    summarize,
)
from realbench.store import RunStore
from realbench.taskpack import TaskPack, load_pack

log = logging.getLogger(__name__)


def parse_task_selection(tasks: str | None) -> list[str] | None:
    """`a,b,c` or `@file` (a JSON list, or an object with a `tasks` list as `realbench select` writes)."""
    if not tasks:
        return None
    if tasks.startswith("@"):
        from realbench.task_lists import read_task_list

        ids = read_task_list(Path(tasks[1:]))
    else:
        ids = [t.strip() for t in tasks.split(",") if t.strip()]
    if not ids:
        raise ConfigError("the task selection is empty")
    return ids


def make_agent_factory(spec: str, pack: TaskPack, options: dict[str, Any], seed: int) -> Callable[[], Agent]:
    if spec == "golden":
        return GoldenAgent
    try:
        from realbench.agents import make_agent
    except ImportError:
        raise UnknownNameError("agent", spec, ["golden"]) from None
    clean = {k: v for k, v in options.items() if v is not None}

    def factory() -> Agent:
        return make_agent(spec, pack=pack, seed=seed, **clean)

    return factory


@contextmanager
def clone_targets(
    pack: TaskPack,
    *,
    workers: int,
    server_url: str | None = None,
    drift: str | None = None,
    scale: float = 2.625,
) -> Iterator[list[Target]]:
    """`workers` headless clone environments sharing one browser and one clone server."""
    from clones.server import CloneServer
    from devices.clone_browser import launch_browser
    from devices.clone_target import CloneTarget

    with ExitStack() as stack:
        url = server_url or stack.enter_context(CloneServer()).url
        browser = stack.enter_context(launch_browser())
        targets: list[Target] = []
        for _ in range(workers):
            t = CloneTarget(pack, url, browser=browser, scale=scale, drift=drift)
            stack.callback(t.teardown)
            targets.append(t)
        yield targets


@contextmanager
def phone_targets(pack: TaskPack, kind: TargetKind, rig: Path | None) -> Iterator[list[Target]]:
    if rig is None:
        raise ConfigError(
            f"--target {kind} needs --rig",
            hint="e.g. --rig rigs/virtual.yaml (virtual phones) or your lab's rig",
        )
    from devices.farm import targets_from_rig

    with targets_from_rig(rig, pack, kind) as farm:
        targets: list[Target] = [*farm]
        yield targets


def run_pack(config: RunConfig) -> dict[str, Any]:
    """Run `config.pack` on its target with its agent; returns the run's summary."""
    c = config
    try:
        kind = TargetKind(c.target)
    except ValueError:
        raise UnknownNameError("target", c.target, [k.value for k in TargetKind]) from None
    if c.video and (kind is TargetKind.CLONE or c.scheduler != "local"):
        raise ConfigError(
            "--video records phone screens, with the local scheduler",
            hint="use it with --target clone-on-phone or real, without --scheduler ray",
        )
    pack = load_pack(c.pack)
    preflight_run(c, kind)
    keys = plan_episodes(pack, task_ids=parse_task_selection(c.tasks), repeats=c.repeats, seed=c.seed)
    skipped: list[SkippedTask] = []
    gate: dict[str, Any] = {}
    if kind is TargetKind.REAL:
        from devices.real_gate import check_manual

        keys, skipped = split_real_allowed(pack, keys)
        gate = check_manual(
            pack,
            [k.task for k in keys],
            virtual=_rig_is_virtual(c.rig),
            confirmed=c.confirm_manual,
        )
    preflight_phones(c, kind)
    factory = make_agent_factory(c.agent, pack, c.agent_options.model_dump(), c.seed)
    if c.agent == "golden" and kind is TargetKind.REAL:
        factory = partial(GoldenAgent, real_side=True)
    probe = factory()
    # The agent's own name (e.g. openai:MODEL) keeps two checkpoints served by one endpoint apart.
    agent_name = probe.name
    rid = c.run_id or default_run_id(agent_name, kind.value)
    settings = getattr(probe, "settings", None)
    store = RunStore(c.out, writer="realbench run")
    recorded = {
        "pack": str(c.pack),
        "target": kind.value,
        "agent": c.agent,
        "repeats": c.repeats,
        "seed": c.seed,
        "tasks": c.tasks,
        "drift": c.drift,
        "scale": c.scale,
        "rig": str(c.rig) if c.rig else None,
        "scheduler": c.scheduler,
        "max_attempts": c.max_attempts,
        "model": c.agent_options.model,
        "format": c.agent_options.fmt,
        "agent_settings": settings() if callable(settings) else None,
        "skipped": [s.as_dict() for s in skipped],
        **({"real_gate": gate} if gate else {}),
    }
    eligible = None
    runners: list[LocalRunner] = []
    # A rerun of a finished run starts no browser and no phone (nor checks the phones' app versions):
    # bringing them up takes seconds (Chromium, adb, a clone server) and no input would reach them.
    # With a certificate or video the targets shape what is recorded, and a Ray cluster has its own
    # bring-up: those start as ever.
    finished = (
        c.scheduler == "local"
        and c.certified is None
        and not c.video
        and bool(keys)
        and not pending_items(store, rid, keys, max_attempts=c.max_attempts, retry_given_up=c.retry_given_up)
    )
    with ExitStack() as stack:
        # pushed first so that it runs last: after the targets closed, which ends the episodes in flight
        stack.push(partial(_on_interrupt, store, runners, c.out))
        if finished:
            log.info("run %s: every planned episode is already stored, nothing to start", rid)
            targets: list[Target] = []
        elif kind is TargetKind.CLONE:
            targets = stack.enter_context(
                clone_targets(pack, workers=c.workers, server_url=c.server_url, drift=c.drift, scale=c.scale)
            )
        else:
            targets = stack.enter_context(phone_targets(pack, kind, c.rig))
            if kind is TargetKind.REAL and c.scheduler == "local":
                _check_pinned_versions(pack, targets)
            if kind is TargetKind.REAL and c.certified is not None:
                from devices.real_gate import apply_certificate

                certified = apply_certificate(c.certified, targets, list(dict.fromkeys(k.task for k in keys)))
                targets, eligible = certified.targets, certified.may_run
                keys = [k for k in keys if k.task in certified.task_ids]
                skipped += certified.skipped
                gate.update(certified.record)
        if c.video:
            from devices.episode_video import VideoTarget

            targets = [VideoTarget(t) for t in targets]
        # recorded once the certificate is applied, so `show` lists what it skipped too
        recorded["skipped"] = [s.as_dict() for s in skipped]
        store.ensure_run(
            rid, pack=pack.app, app=pack.app, agent=agent_name, target=kind.value, config=recorded
        )
        executor = None
        if c.scheduler == "ray":
            from devices.farm.ray_scheduler import ray_executor

            executor = stack.enter_context(ray_executor(pack, c.rig, kind, factory))
        elif c.scheduler != "local":
            raise UnknownNameError("scheduler", c.scheduler, ["local", "ray"])
        if finished:
            summary = run_summary(store, rid, max_attempts=c.max_attempts)
        else:
            runner = LocalRunner(
                store,
                rid,
                pack,
                targets,
                factory,
                max_attempts=c.max_attempts,
                progress=c.progress,
                execute=executor,
                retry_given_up=c.retry_given_up,
                eligible=eligible,
            )
            runners.append(runner)
            if c.video:
                from devices.episode_video import with_video

                runner.execute = with_video(runner.execute)
            summary = runner.run(keys)
    if gate:
        summary.data["real_gate"] = gate
    # summary.json covers every run of the store (a store holds base and trained side by side);
    # its top level stays the run just made.
    this_run = dict(summary.data)
    summary.data["runs"] = {
        r["run_id"]: (this_run if r["run_id"] == rid else summarize(store, r["run_id"]).data)
        for r in store.runs()
    }
    summary.write(c.out / "summary.json")
    store.close()
    return summary.data


INTERRUPT_GRACE_S = 15.0  # how long a Ctrl-C waits for the workers to record what it cut short


def _on_interrupt(store: RunStore, runners: list[LocalRunner], out: Path, exc_type: Any, *_: Any) -> bool:
    """Ctrl-C: the episodes it cut short are recorded as interrupted (not given up, not the
    phone's aborts), the store is closed, and the run ends with one line instead of a traceback."""
    if exc_type is None or not issubclass(exc_type, KeyboardInterrupt):
        return False
    busy = sum(r.wait_stopped(INTERRUPT_GRACE_S) for r in runners)
    store.close()
    raise RunInterrupted(
        f"run stopped (Ctrl-C); finished episodes are stored in {out}"
        + (f" ({busy} worker(s) still busy were left)" if busy else ""),
        hint="rerun the same command to resume: interrupted episodes run again, nothing is redone",
    )


def preflight_run(c: RunConfig, kind: TargetKind) -> None:
    """What can be checked before anything is started (or created, the store included): --out can
    be a folder, a phone target has a rig, the model endpoint serves --model, the drift profile exists."""
    from realbench.folder_checks import require_output_folder

    require_output_folder(Path(c.out))
    if kind is not TargetKind.CLONE and c.rig is None:
        raise ConfigError(
            f"--target {kind} needs --rig",
            hint="e.g. --rig rigs/virtual.yaml (virtual phones) or your lab's rig",
        )
    if c.agent == "openai" and c.agent_options.base_url and c.agent_options.model:
        from realbench.agents.endpoint_check import check_served

        check_served(c.agent_options.base_url, c.agent_options.model, api_key_env=c.agent_options.api_key_env)
    if c.drift is not None:
        from clones.drift import drift_profile

        drift_profile(c.drift)


def preflight_phones(c: RunConfig, kind: TargetKind) -> None:
    """Every phone of the rig that this host drives is attached (phones on another host need Ray)."""
    if kind is not TargetKind.CLONE and c.rig is not None:
        from devices.preflight import check_phones_listed
        from devices.rig import load_rig

        rig = load_rig(c.rig)
        check_phones_listed(rig, rig.phones, scheduler=c.scheduler)


def _check_pinned_versions(pack: TaskPack, targets: list[Target]) -> None:
    from devices.farm.rig_targets import FarmTarget
    from devices.preflight import check_app_versions

    package = pack.real_app.package
    phones: dict[str, object] = {}
    pins: list[str | None] = [pack.real_app.version]
    for t in targets:
        if isinstance(t, FarmTarget):
            phones[t.serial] = t.pool.phone(t.serial)
            pin = t.pool.rig.app_pin(package)
            pins.append(pin.version if pin else None)
    check_app_versions(phones, package, pins)


def _rig_is_virtual(rig: Path | None) -> bool:
    if rig is None:
        return False
    from devices.rig import load_rig

    return load_rig(rig).is_virtual
