"""Builds the targets a run needs and runs a pack on them (the body of `realbench run`).

`clone` targets are headless clone pages served by an in-process clone server (or a running one
with --server-url); `real` and `clone-on-phone` targets come from a rig's phones through the farm.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from realbench.agent import Agent
from realbench.device import Target, TargetKind
from realbench.errors import ConfigError, UnknownNameError
from realbench.golden import GoldenAgent
from realbench.runner import LocalRunner, default_run_id, plan_episodes
from realbench.store import RunStore
from realbench.taskpack import TaskPack, load_pack

log = logging.getLogger(__name__)


def parse_task_selection(tasks: str | None) -> list[str] | None:
    """`a,b,c` or `@file` (a JSON list, or an object with a `tasks` list as `realbench select` writes)."""
    if not tasks:
        return None
    if tasks.startswith("@"):
        path = Path(tasks[1:])
        if not path.exists():
            raise ConfigError(f"task list {path} does not exist")
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict):
            data = data.get("tasks", [])
        ids = [t["task"] if isinstance(t, dict) else str(t) for t in data]
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
    from devices.clone_device import CloneTarget, launch_browser

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


def run_pack(
    *,
    pack_path: Path,
    out: Path,
    target: str,
    agent: str,
    repeats: int = 1,
    seed: int = 0,
    tasks: str | None = None,
    workers: int = 1,
    run_id: str | None = None,
    rig: Path | None = None,
    scheduler: str = "local",
    server_url: str | None = None,
    drift: str | None = None,
    scale: float = 2.625,
    agent_options: dict[str, Any] | None = None,
    max_attempts: int = 3,
    progress: bool = True,
    real_gate: dict[str, Any] | None = None,
) -> dict[str, Any]:
    try:
        kind = TargetKind(target)
    except ValueError:
        raise UnknownNameError("target", target, [k.value for k in TargetKind]) from None
    pack = load_pack(pack_path)
    keys = plan_episodes(pack, task_ids=parse_task_selection(tasks), repeats=repeats, seed=seed)
    gate_opts = real_gate or {}
    gate: dict[str, Any] = {}
    if kind is TargetKind.REAL:
        from devices.real_gate import check_manual

        gate = check_manual(
            pack,
            [k.task for k in keys],
            virtual=_rig_is_virtual(rig),
            confirmed=bool(gate_opts.get("confirm_manual")),
        )
    factory = make_agent_factory(agent, pack, agent_options or {}, seed)
    if agent == "golden" and kind is TargetKind.REAL:
        factory = partial(GoldenAgent, real_side=True)
    probe = factory()
    # The agent's own name (e.g. openai:MODEL) keeps two checkpoints served by one endpoint apart.
    agent_name = probe.name
    rid = run_id or default_run_id(agent_name, kind.value)
    settings = getattr(probe, "settings", None)
    store = RunStore(out)
    config = {
        "pack": str(pack_path),
        "target": kind.value,
        "agent": agent,
        "repeats": repeats,
        "seed": seed,
        "tasks": tasks,
        "drift": drift,
        "scale": scale,
        "rig": str(rig) if rig else None,
        "scheduler": scheduler,
        "model": (agent_options or {}).get("model"),
        "format": (agent_options or {}).get("fmt"),
        "agent_settings": settings() if callable(settings) else None,
        **({"real_gate": gate} if gate else {}),
    }
    store.ensure_run(rid, pack=pack.app, app=pack.app, agent=agent_name, target=kind.value, config=config)
    with ExitStack() as stack:
        if kind is TargetKind.CLONE:
            targets = stack.enter_context(
                clone_targets(pack, workers=workers, server_url=server_url, drift=drift, scale=scale)
            )
        else:
            targets = stack.enter_context(phone_targets(pack, kind, rig))
            if kind is TargetKind.REAL and gate_opts.get("certified"):
                from devices.real_gate import apply_certificate

                targets, kept, record = apply_certificate(
                    Path(gate_opts["certified"]), targets, list(dict.fromkeys(k.task for k in keys))
                )
                keys = [k for k in keys if k.task in kept]
                gate.update(record)
        executor = None
        if scheduler == "ray":
            from devices.farm.ray_scheduler import ray_executor

            executor = stack.enter_context(ray_executor(pack, rig, kind, factory))
        elif scheduler != "local":
            raise UnknownNameError("scheduler", scheduler, ["local", "ray"])
        runner = LocalRunner(
            store, rid, pack, targets, factory, max_attempts=max_attempts, progress=progress, execute=executor
        )
        summary = runner.run(keys)
    if gate:
        summary.data["real_gate"] = gate
    summary.write(out / "summary.json")
    store.close()
    return summary.data


def _rig_is_virtual(rig: Path | None) -> bool:
    if rig is None:
        return False
    from devices.rig import load_rig

    return load_rig(rig).is_virtual
