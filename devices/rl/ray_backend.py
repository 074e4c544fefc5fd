"""Environment workers as Ray actors, for runs larger than one host (``--backend ray``).

Each actor runs an `EnvHost` (a clone server and a Chromium) on whichever node Ray places it, and
answers the same calls as a worker process, concurrently. Every node needs this repository
importable (e.g. ``pip install -e .``) and Chromium installed. A dead actor fails its calls with
`WorkerLost`; the pool replaces it and reports its environments' episodes as aborted.
"""

from __future__ import annotations

import logging
from concurrent.futures import Future
from typing import Any

from devices.rl.config import REPO_ROOT
from devices.rl.errors import ErrorInfo, WorkerLost
from devices.rl.workers import WORKER_START_TIMEOUT_S, WORKER_THREADS, call_host, import_modules
from realbench.errors import ConfigError, RealbenchError, ServerError

log = logging.getLogger(__name__)

CPUS_PER_WORKER = 1.0


class HostActor:
    """The actor's body (wrapped with ``ray.remote`` at start-up, so importing this needs no Ray)."""

    def __init__(self, imports: tuple[str, ...], renderers: int | None = None) -> None:
        from devices.rl.host import EnvHost

        import_modules(imports)
        self.host = EnvHost(renderers=renderers).start()

    def call(self, method: str, args: tuple[Any, ...]) -> tuple[bool, Any]:
        try:
            return True, call_host(self.host, method, args)
        except RealbenchError as exc:
            return False, ErrorInfo.of(exc)
        except Exception as exc:  # report, never lose the call
            log.exception("actor call %s failed", method)
            return False, ErrorInfo.of(ServerError(f"internal error in Ray worker: {exc}"))

    def close(self) -> None:
        self.host.close()


class RayWorker:
    """A `devices.rl.workers.Worker` backed by one Ray actor."""

    def __init__(self, name: str, actor: Any) -> None:
        self.name = name
        self.actor = actor
        self._lost: str | None = None

    @property
    def alive(self) -> bool:
        return self._lost is None

    def submit(self, method: str, *args: Any) -> Future[Any]:
        out: Future[Any] = Future()
        if self._lost is not None:
            out.set_exception(WorkerLost(f"Ray worker {self.name} is gone ({self._lost})"))
            return out
        inner = self.actor.call.remote(method, args).future()

        def done(f: Future[Any]) -> None:
            try:
                ok, payload = f.result()
            except Exception as exc:  # RayActorError and friends: the actor is gone
                self._lost = type(exc).__name__
                out.set_exception(
                    WorkerLost(
                        f"Ray worker {self.name} is gone ({type(exc).__name__})",
                        hint="its environments' episodes are aborted; they are recreated on a new actor",
                    )
                )
                return
            if ok:
                out.set_result(payload)
            else:
                out.set_exception(payload.to_exception())

        inner.add_done_callback(done)
        return out

    def close(self) -> None:
        import ray

        if self._lost is None:
            try:
                ray.get(self.actor.close.remote(), timeout=30)
            except Exception as exc:  # closing must go on
                log.debug("closing Ray worker %s: %s", self.name, exc)
        ray.kill(self.actor, no_restart=True)
        self._lost = self._lost or "closed"

    def kill(self) -> None:
        """Kill the actor (fault injection for tests and drills)."""
        import ray

        ray.kill(self.actor, no_restart=True)


def start_ray_workers(
    count: int,
    *,
    imports: tuple[str, ...] = (),
    address: str | None = None,
    prefix: str = "ray-worker",
    cpus: float = CPUS_PER_WORKER,
    renderers: int | None = None,
) -> list[RayWorker]:
    """`count` started actors; connects to `address` (or starts a local Ray) if Ray is not up yet.
    `renderers`: renderer processes of each actor's browser (None: the browser's default, from the
    cores of the node the actor runs on)."""
    try:
        import ray
    except ImportError:
        raise ConfigError("the ray backend needs Ray", hint="pip install 'realbench[ray]'") from None
    if not ray.is_initialized():
        ray.init(
            address=address,
            include_dashboard=False,
            logging_level=logging.WARNING,
            runtime_env={"env_vars": {"PYTHONPATH": str(REPO_ROOT)}},
        )
    remote_cls = ray.remote(HostActor).options(num_cpus=cpus, max_concurrency=WORKER_THREADS)
    actors = [remote_cls.remote(imports, renderers) for _ in range(count)]
    workers = [RayWorker(f"{prefix}-{i}", a) for i, a in enumerate(actors)]
    try:
        for w in workers:
            w.submit("stats").result(WORKER_START_TIMEOUT_S)
    except Exception:
        for w in workers:
            w.close()
        raise
    return workers
