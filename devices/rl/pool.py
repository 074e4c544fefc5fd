"""Environments spread over workers: placement, batched calls, and recovery from lost workers.

`EnvPool` is what the vector environment and the rollout service share. Environments get
pool-wide integer keys; a batch call is split per worker, sent to all workers at once, and
gathered. When a worker dies, a new one replaces it and its environments are recreated there:
the episodes they were in are reported as aborted (``info["aborted"]``, outcome ``env_invalid``),
never silently restarted.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from devices.rl.config import EnvConfig
from devices.rl.errors import EnvNotFound, ErrorInfo, WorkerLost
from devices.rl.host import ResetRequest, RestoreRequest, StepRequest
from devices.rl.transitions import EnvSnapshot, Transition
from devices.rl.workers import Backend, Worker, renderers_per_browser, start_worker, start_workers
from realbench.errors import RealbenchError
from realbench.outcome import EndReason, Outcome

log = logging.getLogger(__name__)


@dataclass
class EnvSlot:
    key: int
    worker: int
    local_id: int
    config: EnvConfig
    last: Transition | None = None
    lost: str | None = None  # the worker died: the next step reports the episode as aborted


def aborted(slot: EnvSlot, why: str) -> Transition | ErrorInfo:
    if slot.last is None:
        return ErrorInfo.of(WorkerLost(why, hint="reset the environment"))
    info = {
        **slot.last.info,
        "aborted": True,
        "error": why,
        "end_reason": EndReason.ABORT.value,
        "outcome": Outcome.ENV_INVALID.value,
        "success": False,
    }
    return Transition(
        observation=slot.last.observation, reward=0.0, terminated=False, truncated=True, info=info
    )


class EnvPool:
    """Environments on `workers` workers of one backend. Thread-safe."""

    def __init__(
        self,
        *,
        backend: Backend | str = Backend.PROCESS,
        workers: int = 1,
        imports: tuple[str, ...] = (),
        ray_address: str | None = None,
        renderers: int | None = None,
    ) -> None:
        self.backend = Backend(backend)
        self.imports = imports
        self.ray_address = ray_address
        # By default the process workers' browsers share this machine's cores (Ray actors may be
        # elsewhere); more renderers each buy back a few % of steps/s for ~0.7 MiB per environment.
        if renderers is None and self.backend is Backend.PROCESS:
            renderers = renderers_per_browser(workers)
        self.renderers = renderers
        self.workers: list[Worker] = start_workers(
            self.backend, workers, imports=imports, ray_address=ray_address, renderers=self.renderers
        )
        self.replaced = 0
        self._slots: dict[int, EnvSlot] = {}
        self._keys = itertools.count()
        self._lock = threading.Lock()
        self._replace_lock = threading.Lock()

    # --- environments ---

    def create(self, configs: list[EnvConfig]) -> list[int | ErrorInfo]:
        """Create environments, spread evenly over the workers (the least loaded first)."""
        with self._lock:
            load = [0] * len(self.workers)
            for slot in self._slots.values():
                load[slot.worker] += 1
        placement: list[int] = []
        for _ in configs:
            w = min(range(len(load)), key=lambda i: load[i])
            placement.append(w)
            load[w] += 1
        groups: dict[int, list[int]] = {}
        for i, w in enumerate(placement):
            groups.setdefault(w, []).append(i)
        futures = {
            w: self.workers[w].submit("create", [configs[i] for i in idx]) for w, idx in groups.items()
        }
        out: list[int | ErrorInfo] = [ErrorInfo.of(WorkerLost("not created"))] * len(configs)
        for w, idx in groups.items():
            try:
                local_ids = futures[w].result()
            except RealbenchError as exc:
                for i in idx:
                    out[i] = ErrorInfo.of(exc)
                continue
            for i, local in zip(idx, local_ids, strict=True):
                if isinstance(local, ErrorInfo):
                    out[i] = local
                    continue
                with self._lock:
                    key = next(self._keys)
                    self._slots[key] = EnvSlot(key=key, worker=w, local_id=int(local), config=configs[i])
                out[i] = key
        return out

    def slot(self, key: int) -> EnvSlot:
        slot = self._slots.get(key)
        if slot is None:
            raise EnvNotFound(f"no environment {key} (unknown or closed)", hint="create one first")
        return slot

    def keys(self) -> list[int]:
        with self._lock:
            return sorted(self._slots)

    # --- batch calls ---

    def reset(
        self, items: list[tuple[int, int | None, dict[str, Any] | None]]
    ) -> list[Transition | ErrorInfo]:
        def request(slot: EnvSlot, item: tuple[int, int | None, dict[str, Any] | None]) -> ResetRequest:
            return ResetRequest(slot.local_id, item[1], item[2])

        results = self._call("reset", items, request, retry=True)
        for (key, *_), result in zip(items, results, strict=True):
            self._remember(key, result, clear_lost=True)
        return results

    def step(self, items: list[tuple[int, Any]]) -> list[Transition | ErrorInfo]:
        results: list[Transition | ErrorInfo | None] = [None] * len(items)
        live: list[int] = []
        for i, (key, _) in enumerate(items):
            slot = self._slots.get(key)
            if slot is not None and slot.lost is not None:
                results[i] = aborted(slot, slot.lost)
                slot.lost = None
            else:
                live.append(i)
        stepped = self._call(
            "step",
            [items[i] for i in live],
            lambda slot, item: StepRequest(slot.local_id, item[1]),
            retry=False,
        )
        for i, result in zip(live, stepped, strict=True):
            results[i] = result
            self._remember(items[i][0], result, clear_lost=False)
        done = [r for r in results if r is not None]
        assert len(done) == len(items), "every step request gets a transition or an error"
        return done

    def snapshot(self, keys: list[int]) -> list[EnvSnapshot | ErrorInfo]:
        return self._call("snapshot", [(k,) for k in keys], lambda slot, _: slot.local_id, retry=False)

    def restore(self, items: list[tuple[int, EnvSnapshot]]) -> list[Transition | ErrorInfo]:
        results = self._call(
            "restore", items, lambda slot, item: RestoreRequest(slot.local_id, item[1]), retry=True
        )
        for (key, _), result in zip(items, results, strict=True):
            self._remember(key, result, clear_lost=True)
        return results

    def verdict(self, keys: list[int]) -> list[dict[str, Any] | ErrorInfo]:
        return self._call("verdict", [(k,) for k in keys], lambda slot, _: slot.local_id, retry=False)

    def close_envs(self, keys: list[int]) -> list[int | ErrorInfo]:
        results = self._call("close_envs", [(k,) for k in keys], lambda slot, _: slot.local_id, retry=False)
        out: list[int | ErrorInfo] = []
        for key, result in zip(keys, results, strict=True):
            if isinstance(result, ErrorInfo) and result.type != WorkerLost.__name__:
                out.append(result)
                continue
            with self._lock:
                self._slots.pop(key, None)
            out.append(key)
        return out

    def stats(self) -> list[dict[str, Any] | ErrorInfo]:
        out: list[dict[str, Any] | ErrorInfo] = []
        futures = [w.submit("stats") for w in self.workers]
        for w, f in zip(self.workers, futures, strict=True):
            try:
                out.append({"worker": w.name, **f.result()})
            except RealbenchError as exc:
                out.append(ErrorInfo.of(exc))
        return out

    def close(self, timeout_s: float | None = None) -> None:
        """Stop every worker; with `timeout_s`, a process worker that does not stop within it is killed."""
        from devices.rl.workers import ProcessWorker

        for w in self.workers:
            try:
                if timeout_s is not None and isinstance(w, ProcessWorker):
                    w.close(timeout=timeout_s)
                else:
                    w.close()
            except Exception as exc:  # closing must go on for the other workers
                log.warning("closing worker %s: %s", w.name, exc)
        with self._lock:
            self._slots.clear()

    def __enter__(self) -> EnvPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- internals ---

    def _remember(self, key: int, result: Any, *, clear_lost: bool) -> None:
        slot = self._slots.get(key)
        if slot is not None and isinstance(result, Transition):
            slot.last = result
            if clear_lost:
                slot.lost = None

    def _call(
        self,
        method: str,
        items: list[Any],
        request: Callable[[EnvSlot, Any], Any],
        *,
        retry: bool,
    ) -> list[Any]:
        """Send one batch per worker, all at once; gather per item (results or ErrorInfo)."""
        out: list[Any] = [None] * len(items)
        groups: dict[int, list[tuple[int, EnvSlot]]] = {}
        for i, item in enumerate(items):
            try:
                slot = self.slot(item[0])
            except RealbenchError as exc:
                out[i] = ErrorInfo.of(exc)
                continue
            groups.setdefault(slot.worker, []).append((i, slot))
        futures: dict[int, Future[Any]] = {
            w: self.workers[w].submit(method, [request(slot, items[i]) for i, slot in members])
            for w, members in groups.items()
        }
        for w, members in groups.items():
            try:
                results = futures[w].result()
            except WorkerLost as exc:
                self._replace(w, exc.message)
                for i, slot in members:
                    if retry:
                        out[i] = self._call(method, [items[i]], request, retry=False)[0]
                    elif method == "step":
                        out[i] = aborted(slot, exc.message)
                        slot.lost = None
                    else:
                        out[i] = ErrorInfo.of(exc)
                continue
            except RealbenchError as exc:
                for i, _ in members:
                    out[i] = ErrorInfo.of(exc)
                continue
            for (i, _), result in zip(members, results, strict=True):
                out[i] = result
        return out

    def _replace(self, index: int, why: str) -> None:
        """Replace a dead worker and recreate its environments there (flagged as aborted)."""
        with self._replace_lock:
            old = self.workers[index]
            if old.alive:
                return
            log.warning("worker %s lost (%s); starting a replacement", old.name, why)
            try:
                old.close()
            except Exception as exc:  # it is dead already
                log.debug("closing lost worker %s: %s", old.name, exc)
            worker = start_worker(
                self.backend,
                f"{old.name}r",
                imports=self.imports,
                ray_address=self.ray_address,
                renderers=self.renderers,
            )
            self.workers[index] = worker
            self.replaced += 1
            with self._lock:
                slots = [s for s in self._slots.values() if s.worker == index]
            if not slots:
                return
            created = worker.submit("create", [s.config for s in slots]).result()
            for slot, local in zip(slots, created, strict=True):
                if isinstance(local, ErrorInfo):
                    log.warning("could not recreate environment %d: %s", slot.key, local.message)
                    with self._lock:
                        self._slots.pop(slot.key, None)
                    continue
                slot.local_id = int(local)
                slot.lost = f"worker {old.name} was lost ({why}); the episode was aborted"
