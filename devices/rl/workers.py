"""Environment workers: an `EnvHost` in this process, in a child process, or in a Ray actor.

All three answer the same calls (`EnvHost`'s batch methods, by name) with futures, so the vector
environment and the rollout service drive them alike and overlap calls to different workers.
A worker whose process dies fails its pending calls with `WorkerLost`; its owner replaces it.
"""

from __future__ import annotations

import importlib
import itertools
import logging
import multiprocessing as mp
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from enum import StrEnum
from multiprocessing.connection import Connection
from typing import Any, Protocol

from devices.clone_browser import default_renderers
from devices.rl.errors import ErrorInfo, WorkerLost
from devices.rl.host import EnvHost
from realbench.errors import ConfigError, RealbenchError, ServerError

log = logging.getLogger(__name__)

WORKER_START_TIMEOUT_S = 90.0
WORKER_THREADS = 32
WORKER_CLOSE_TIMEOUT_S = 10.0  # closing browsers on stop; past it the worker exits anyway
PARENT_POLL_S = 1.0
HOST_METHODS = frozenset(
    {"create", "reset", "step", "snapshot", "restore", "verdict", "close_envs", "stats", "kill_browser"}
)


class Backend(StrEnum):
    INLINE = "inline"  # a host in this process (tests, single environments)
    PROCESS = "process"  # one child process per worker (the default: one browser per process)
    RAY = "ray"  # one Ray actor per worker, anywhere in a Ray cluster


class Worker(Protocol):
    name: str

    @property
    def alive(self) -> bool: ...

    def submit(self, method: str, *args: Any) -> Future[Any]: ...

    def close(self) -> None: ...


def renderers_per_browser(workers: int) -> int:
    """Renderer processes for the browser of each of `workers` worker processes on this machine:
    the default share of the cores, divided among the browsers (at least one each). On two cores,
    two workers' browsers with two renderers each held ~0.7 MiB more per environment than with one
    each, for the same steps per second; one browser keeps both (one renderer for 100 environments:
    50 steps/s against 63, docs/benchmarks.md)."""
    return max(1, default_renderers() // max(1, workers))


def call_host(host: EnvHost, method: str, args: tuple[Any, ...]) -> Any:
    if method not in HOST_METHODS:
        raise ConfigError(f"unknown worker call {method!r}", hint=f"known: {', '.join(sorted(HOST_METHODS))}")
    return getattr(host, method)(*args)


def import_modules(modules: tuple[str, ...]) -> None:
    """Run a worker's start-up imports: ``package.module`` imports it, ``package.module:function``
    also calls the function (e.g. one that registers extra clones, as a test's toy clone does)."""
    for spec in modules:
        name, _, function = spec.partition(":")
        module = importlib.import_module(name)
        if function:
            getattr(module, function)()


class InlineWorker:
    """A host in this process; calls run on a small thread pool."""

    def __init__(
        self, name: str = "inline-0", *, imports: tuple[str, ...] = (), renderers: int | None = None
    ) -> None:
        import_modules(imports)
        self.name = name
        self.host = EnvHost(renderers=renderers).start()
        self._threads = ThreadPoolExecutor(max_workers=WORKER_THREADS, thread_name_prefix=name)
        self._closed = False

    @property
    def alive(self) -> bool:
        return not self._closed

    def submit(self, method: str, *args: Any) -> Future[Any]:
        if self._closed:
            future: Future[Any] = Future()
            future.set_exception(WorkerLost(f"worker {self.name} is closed"))
            return future
        return self._threads.submit(call_host, self.host, method, args)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._threads.shutdown(wait=True)
            self.host.close()


# --- child processes ------------------------------------------------------------------------------


def _worker_main(
    conn: Connection, imports: tuple[str, ...], log_level: int, renderers: int | None = None
) -> None:
    """The body of a worker process: one host, calls answered concurrently, until told to stop."""
    logging.basicConfig(level=log_level, format="%(asctime)s %(levelname)s %(name)s[worker]: %(message)s")
    send_lock = threading.Lock()

    def send(message: tuple[Any, ...]) -> None:
        with send_lock:
            conn.send(message)

    try:
        import_modules(imports)
        host = EnvHost(renderers=renderers).start()
    except RealbenchError as exc:
        send((0, False, ErrorInfo.of(exc)))
        return
    except Exception as exc:  # e.g. a start-up import that fails: say so instead of just dying
        send((0, False, ErrorInfo.of(ServerError(f"worker start-up failed: {type(exc).__name__}: {exc}"))))
        return
    send((0, True, "ready"))
    threads = ThreadPoolExecutor(max_workers=WORKER_THREADS, thread_name_prefix="rl-worker")
    parent = os.getppid()

    def exit_when_orphaned() -> None:
        # the pipe normally tells (EOF), but a busy call must not keep an orphan and its browser alive
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        log.warning("parent process %d is gone; worker exits", parent)
        _bounded_exit(host, threads)

    threading.Thread(target=exit_when_orphaned, name="rl-worker-orphan-watch", daemon=True).start()

    def run(req_id: int, method: str, args: tuple[Any, ...]) -> None:
        try:
            reply: tuple[Any, ...] = (req_id, True, call_host(host, method, args))
        except RealbenchError as exc:
            reply = (req_id, False, ErrorInfo.of(exc))
        except Exception as exc:  # report, never hang the caller
            log.exception("worker call %s failed", method)
            reply = (req_id, False, ErrorInfo.of(ServerError(f"internal error in worker: {exc}")))
        try:
            send(reply)
        except (OSError, EOFError):
            log.debug("parent went away before reply %d", req_id)

    try:
        while True:
            try:
                req_id, method, args = conn.recv()
            except (EOFError, OSError):
                break
            if method == "__stop__":
                break
            threads.submit(run, req_id, method, args)
    finally:
        _bounded_exit(host, threads)


def _bounded_exit(host: EnvHost, threads: ThreadPoolExecutor) -> None:
    """Close the host (its browsers) without waiting on a busy call forever, then leave the process:
    a call stuck in parsing or a page must not keep the worker alive after it was told to stop."""
    threads.shutdown(wait=False, cancel_futures=True)
    closer = threading.Thread(target=host.close, name="rl-worker-close", daemon=True)
    closer.start()
    closer.join(WORKER_CLOSE_TIMEOUT_S)
    if closer.is_alive():
        log.warning("closing the worker's host took over %.0f s; exiting anyway", WORKER_CLOSE_TIMEOUT_S)
    logging.shutdown()
    os._exit(0)


class ProcessWorker:
    """A host in a child process (spawned, so no threads or browsers are inherited)."""

    def __init__(self, name: str, *, imports: tuple[str, ...] = (), renderers: int | None = None) -> None:
        self.name = name
        ctx = mp.get_context("spawn")
        parent, child = ctx.Pipe()
        self._conn = parent
        self._process = ctx.Process(
            target=_worker_main,
            args=(child, imports, logging.getLogger().getEffectiveLevel(), renderers),
            name=f"realbench-{name}",
            daemon=True,
        )
        self._process.start()
        child.close()
        self._ids = itertools.count(1)
        self._pending: dict[int, Future[Any]] = {}
        self._lock = threading.Lock()
        self._lost: str | None = None
        self._ready: Future[Any] = Future()
        self._pending[0] = self._ready
        self._reader = threading.Thread(target=self._read, name=f"{name}-reader", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int | None:
        return self._process.pid

    @property
    def alive(self) -> bool:
        return self._lost is None and self._process.is_alive()

    def wait_ready(self, timeout: float = WORKER_START_TIMEOUT_S) -> ProcessWorker:
        try:
            self._ready.result(timeout)
        except TimeoutError:
            self.close()
            raise ServerError(f"worker {self.name} did not start within {timeout:.0f} s") from None
        except RealbenchError:
            self.close()
            raise
        return self

    def submit(self, method: str, *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            if self._lost is not None:
                future.set_exception(WorkerLost(f"worker {self.name} is gone ({self._lost})"))
                return future
            req_id = next(self._ids)
            self._pending[req_id] = future
            try:
                self._conn.send((req_id, method, args))
            except (OSError, EOFError, BrokenPipeError) as exc:
                self._pending.pop(req_id, None)
                future.set_exception(WorkerLost(f"worker {self.name} is gone ({exc})"))
        return future

    def _read(self) -> None:
        while True:
            try:
                req_id, ok, payload = self._conn.recv()
            except (EOFError, OSError):
                break
            with self._lock:
                future = self._pending.pop(req_id, None)
            if future is None:
                continue
            if ok:
                future.set_result(payload)
            else:
                future.set_exception(
                    payload.to_exception() if isinstance(payload, ErrorInfo) else ServerError(str(payload))
                )
        self._fail_all("its process exited")

    def _fail_all(self, why: str) -> None:
        with self._lock:
            if self._lost is None:
                self._lost = why
            pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(
                    WorkerLost(
                        f"worker {self.name} is gone ({why})",
                        hint="its environments' episodes are aborted; they are recreated in a new worker",
                    )
                )

    def close(self, timeout: float = 20.0) -> None:
        if self._process.is_alive():
            try:
                with self._lock:
                    self._conn.send((0, "__stop__", ()))
            except (OSError, EOFError, BrokenPipeError):
                pass
            self._process.join(timeout)
        if self._process.is_alive():
            log.warning("worker %s did not stop; terminating it", self.name)
            self._process.terminate()
            self._process.join(5)
        self._fail_all("closed")
        self._conn.close()
        self._reader.join(5)

    def kill(self) -> None:
        """Kill the worker process (fault injection for tests and drills)."""
        self._process.kill()
        self._process.join(5)


def start_workers(
    backend: Backend | str,
    count: int,
    *,
    imports: tuple[str, ...] = (),
    ray_address: str | None = None,
    prefix: str = "worker",
    renderers: int | None = None,
) -> list[Worker]:
    """`count` started workers of `backend` (process workers start in parallel; `renderers` per
    worker's browser, None for the browser's default: `EnvPool` passes process workers their share
    of this machine's, `renderers_per_browser`)."""
    backend = Backend(backend)
    if count < 1:
        raise ConfigError("at least one worker is needed", hint="pass workers >= 1")
    if backend is Backend.INLINE:
        if count != 1:
            raise ConfigError(
                "the inline backend has exactly one worker", hint="use --backend process for more"
            )
        return [InlineWorker(f"{prefix}-0", imports=imports, renderers=renderers)]
    if backend is Backend.RAY:
        from devices.rl.ray_backend import start_ray_workers

        ray_workers: list[Worker] = list(
            start_ray_workers(count, imports=imports, address=ray_address, prefix=prefix, renderers=renderers)
        )
        return ray_workers
    t0 = time.monotonic()
    workers = [ProcessWorker(f"{prefix}-{i}", imports=imports, renderers=renderers) for i in range(count)]
    try:
        for w in workers:
            w.wait_ready()
    except BaseException:
        for w in workers:
            w.close()
        raise
    log.info("%d worker processes ready in %.1f s", count, time.monotonic() - t0)
    return list(workers)


def start_worker(
    backend: Backend | str,
    name: str,
    *,
    imports: tuple[str, ...] = (),
    ray_address: str | None = None,
    renderers: int | None = None,
) -> Worker:
    """One more worker (a replacement for a lost one; `renderers` as the ones it replaces had)."""
    backend = Backend(backend)
    if backend is Backend.RAY:
        from devices.rl.ray_backend import start_ray_workers

        return start_ray_workers(1, imports=imports, address=ray_address, prefix=name, renderers=renderers)[0]
    if backend is Backend.INLINE:
        return InlineWorker(name, imports=imports, renderers=renderers)
    return ProcessWorker(name, imports=imports, renderers=renderers).wait_ready()
