"""`--scheduler ray`: episodes run on the host where their phone is plugged in.

Each phone is a Ray custom resource named ``phone:<serial>`` that the host it is plugged into
declares when it joins the cluster::

    ray start --address=HEAD:6379 --resources='{"phone:8KX7N19A22001234": 1}'

The driver (the process running `realbench run`) keeps the run store. For each phone it creates
one `PhoneWorker` actor that requires that phone's resource, so Ray places it on the right host;
the actor holds the phone's connection, health state and lease across episodes, runs each episode
there and returns the `EpisodeResult` (plain data and bytes) to the driver, which writes it.

Without a cluster address (`RAY_ADDRESS` unset), a local Ray instance is started and phones need
no resources: every phone is local.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from devices.rig import PhoneSpec, Rig, default_adb_port, load_rig
from realbench.agent import Agent
from realbench.device import Target, TargetKind
from realbench.episode import EpisodeResult
from realbench.errors import ConfigError
from realbench.store import EpisodeKey
from realbench.taskpack import TaskPack

log = logging.getLogger(__name__)

RESOURCE_PREFIX = "phone:"


def phone_resource(serial: str) -> str:
    return f"{RESOURCE_PREFIX}{serial}"


class PhoneWorker:
    """Lives on the phone's host (a Ray actor); runs episodes on that one phone."""

    def __init__(
        self, rig: Rig, spec: PhoneSpec, pack: TaskPack, kind: str, agent_factory: Callable[[], Agent]
    ) -> None:
        from devices.farm.pool import PhonePool
        from devices.farm.rig_targets import FarmTarget

        self.pool = PhonePool(rig, [spec])
        self.target = FarmTarget(self.pool, spec.serial, pack, TargetKind(kind))
        self.pack = pack
        self.agent = agent_factory()

    def where(self) -> dict[str, Any]:
        import socket

        return {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "adb_port": str(default_adb_port()),
        }

    def run(self, task_id: str, seed: int, repeat: int) -> EpisodeResult:
        from realbench.episode import run_episode
        from realbench.runner import task_instance

        task = self.pack.task(task_id)
        instance = task_instance(self.target, task, seed)
        result = run_episode(instance, self.target, self.agent)
        result.device = {**result.device, "ray_worker": self.where()}
        self.target.after_episode(result)
        return result

    def close(self) -> None:
        self.target.teardown()
        self.pool.close()


class RayExecutor:
    """The runner's `execute(target, key)`, dispatching to one actor per phone."""

    def __init__(
        self,
        rig: Rig,
        pack: TaskPack,
        kind: TargetKind,
        agent_factory: Callable[[], Agent],
        *,
        use_resources: bool,
    ) -> None:
        self.rig = rig
        self.pack = pack
        self.kind = kind
        self.agent_factory = agent_factory
        self.use_resources = use_resources
        self._actors: dict[str, Any] = {}
        self._lock = threading.Lock()

    def _spec(self, target: Target) -> PhoneSpec:
        serial = str(target.describe().get("serial"))
        pool = getattr(target, "pool", None)
        if pool is not None:
            return pool.record(serial).spec  # type: ignore[no-any-return]
        for spec in self.rig.phones:
            if spec.serial == serial:
                return spec
        raise ConfigError(f"phone {serial} is not in rig {self.rig.name!r}")

    def actor(self, target: Target) -> Any:
        import ray

        spec = self._spec(target)
        with self._lock:
            if spec.serial not in self._actors:
                options: dict[str, Any] = {"num_cpus": 0, "max_restarts": 1, "max_concurrency": 1}
                if self.use_resources:
                    resource = phone_resource(spec.serial)
                    if resource not in ray.cluster_resources():
                        # An actor needing a resource nobody offers would wait for ever.
                        raise ConfigError(
                            f"no host in the Ray cluster offers {resource!r}",
                            hint="ray start --address=HEAD --resources='{\"phone:SERIAL\": 1}' on the phone's host",
                        )
                    options["resources"] = {resource: 1}
                cls = ray.remote(PhoneWorker)
                self._actors[spec.serial] = cls.options(**options).remote(
                    self.rig, spec, self.pack, str(self.kind), self.agent_factory
                )
            return self._actors[spec.serial]

    def __call__(self, target: Target, key: EpisodeKey) -> EpisodeResult:
        import ray

        actor = self.actor(target)
        try:
            return ray.get(actor.run.remote(key.task, key.seed, key.repeat))  # type: ignore[no-any-return]
        except ray.exceptions.RayError as exc:
            # The worker or its host died: an unscored abort, rerun elsewhere by the runner.
            from realbench.outcome import EndReason, Outcome

            log.warning("ray worker for %s failed: %s", key, exc)
            task = self.pack.task(key.task)
            return EpisodeResult(
                task_id=key.task,
                seed=key.seed,
                instruction=task.instruction,
                params={},
                agent="?",
                target=str(self.kind),
                device=target.describe(),
                outcome=Outcome.ENV_INVALID,
                end_reason=EndReason.ABORT,
                error=f"RayError: {type(exc).__name__}: {str(exc)[:300]}",
            )

    def close(self) -> None:
        import ray

        for actor in self._actors.values():
            with contextlib.suppress(Exception):
                ray.get(actor.close.remote(), timeout=30)
            with contextlib.suppress(Exception):
                ray.kill(actor)
        self._actors.clear()


def missing_phone_resources(rig: Rig) -> list[str]:
    import ray

    have = set(ray.cluster_resources())
    return [s.serial for s in rig.phones if phone_resource(s.serial) not in have]


@contextlib.contextmanager
def ray_executor(
    pack: TaskPack,
    rig: Rig | str | Path | None,
    kind: TargetKind | str,
    agent_factory: Callable[[], Agent],
    *,
    address: str | None = None,
) -> Iterator[RayExecutor]:
    """Connect to the Ray cluster (`address`, else $RAY_ADDRESS, else a local instance) and yield
    the executor the runner calls for each episode."""
    import ray

    if rig is None:
        raise ConfigError("--scheduler ray needs --rig", hint="the rig says which phones exist and where")
    loaded = rig if isinstance(rig, Rig) else load_rig(rig)
    address = address or os.environ.get("RAY_ADDRESS")
    started_here = False
    if not ray.is_initialized():
        ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
        started_here = True
    use_resources = bool(address)
    if use_resources and loaded.phones:
        missing = missing_phone_resources(loaded)
        if missing:
            raise ConfigError(
                f"the Ray cluster has no resource for phone(s) {', '.join(missing)}",
                hint="on the host each phone is plugged into: ray start --address=HEAD --resources='{\"phone:SERIAL\": 1}'",
            )
    executor = RayExecutor(loaded, pack, TargetKind(kind), agent_factory, use_resources=use_resources)
    try:
        yield executor
    finally:
        executor.close()
        if started_here:
            ray.shutdown()


class VirtualPhonesOnNode:
    """Hosts virtual phones inside a Ray actor, so they live on (and attach to the adb server of)
    the node the actor is placed on — how tests and demos stand in for a second lab host."""

    def __init__(
        self, n: int, ports: list[int], adb_port: int | None = None, screens: str = "static"
    ) -> None:
        from devices.virtual import VirtualPhoneHost

        self.host = VirtualPhoneHost()
        self.infos = self.host.start(n, screens=screens, drift="none", ports=ports)
        self.host.adb_connect(adb_port)

    def serials(self) -> list[str]:
        return [i.serial for i in self.infos]

    def inputs(self, serial: str) -> int:
        return len(self.host.phone(serial).events)

    def close(self) -> None:
        self.host.stop()
