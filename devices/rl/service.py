"""The rollout service: clone environments over HTTP for trainers in other processes or machines.

One service hosts environments on W workers (processes, or Ray actors); any number of trainer
workers share it. The API is documented, with examples, in docs/rl.md:

  POST   /v1/envs                      {pack, task_id?, count?, ...EnvConfig} -> {env_ids, ...}
  POST   /v1/envs/{env_id}/reset       {seed?, options?}   -> transition
  POST   /v1/envs/{env_id}/step        {action}            -> transition
  POST   /v1/envs/{env_id}/snapshot                         -> {snapshot}
  POST   /v1/envs/{env_id}/restore     {snapshot}          -> transition
  GET    /v1/envs/{env_id}/reward                           -> {reward, verdict}
  DELETE /v1/envs/{env_id}                                  -> {closed}
  POST   /v1/batch/reset               {resets: [{env_id, seed?, options?}]} -> {results}
  POST   /v1/batch/step                {steps: [{env_id, action}]}           -> {results}
  GET    /v1/health                                         -> {ok, envs, workers}

A transition is ``{observation: {screenshot: {format, width, height, data (base64)}, hierarchy},
reward, terminated, truncated, info}``. Errors are 4xx (404 unknown or closed environment, 409
no episode in progress, 400 anything else the caller can fix) or 503 (a worker was lost) with
``{error, type, hint}``.

Security and limits (realbench.http_guard, docs/rl.md): loopback by default, a token from an
environment variable for any other address, Host allow-list and Origin check, JSON bodies only,
a body-size cap (413), JSON nesting cap (400), an environment cap (429) and idle expiry. Clients
name only registered packs (``env``, or a pack under taskpacks/) or packs inside a folder the
operator allow-listed (``--pack-dir``). A shutdown waits at most `shutdown_timeout_s` for requests
and workers, then kills the workers; workers exit by themselves when the service dies.
"""

from __future__ import annotations

import functools
import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from devices.rl import PACK_ENVS
from devices.rl.config import TASKPACKS, EnvConfig
from devices.rl.errors import (
    EnvNotFound,
    ErrorInfo,
    PackNotAllowed,
    SnapshotMismatch,
    WorkerLost,
    http_status,
)
from devices.rl.pool import EnvPool
from devices.rl.transitions import EnvSnapshot, Transition
from realbench.errors import ConfigError, RealbenchError, ServerError
from realbench.http_guard import (
    DEFAULT_TOKEN_ENV,
    IN_PROCESS_SECURITY,
    GuardMiddleware,
    LimitExceeded,
    ServerLimits,
    ServerSecurity,
    parse_json_body,
    security_for,
    server_config,
)

log = logging.getLogger(__name__)

MAX_BATCH = 1024
ENV_PREFIX = "env-"


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ResetBody(_Body):
    seed: int | None = None
    options: dict[str, Any] | None = None


class StepBody(_Body):
    action: Any = Field(description="Action JSON text (the action space's element) or the object itself")


class RestoreBody(_Body):
    snapshot: str = Field(min_length=1)


class BatchReset(_Body):
    class Item(ResetBody):
        env_id: str

    resets: list[Item] = Field(min_length=1, max_length=MAX_BATCH)


class BatchStep(_Body):
    class Item(StepBody):
        env_id: str

    steps: list[Item] = Field(min_length=1, max_length=MAX_BATCH)


def env_config_from(body: dict[str, Any]) -> tuple[EnvConfig, int]:
    """The create body: EnvConfig fields, ``count``, and ``env`` (a registered id naming the pack)."""
    body = dict(body)
    count = body.pop("count", 1)
    if not isinstance(count, int) or not 1 <= count <= MAX_BATCH:
        raise ConfigError(f"count must be an integer from 1 to {MAX_BATCH}")
    env_name = body.pop("env", None)
    if env_name is not None:
        if env_name not in PACK_ENVS:
            raise ConfigError(
                f"unknown env {env_name!r}", hint=f"known: {', '.join(PACK_ENVS)}; or pass pack"
            )
        body.setdefault("pack", PACK_ENVS[env_name])
    return EnvConfig.model_validate(body), count


class RolloutService:
    """Environments, snapshots and the HTTP app around an `EnvPool`."""

    def __init__(
        self, pool: EnvPool, *, limits: ServerLimits | None = None, pack_dirs: tuple[Path | str, ...] = ()
    ) -> None:
        self.pool = pool
        self.limits = limits or ServerLimits()
        self.pack_dirs = (TASKPACKS.resolve(), *(Path(d).resolve() for d in pack_dirs))
        self._configs: dict[int, EnvConfig] = {}
        self._last_used: dict[int, float] = {}
        self._snapshots: OrderedDict[str, EnvSnapshot] = OrderedDict()
        self._lock = threading.Lock()
        self.expired = 0

    # --- operations (blocking; the app runs them in a thread pool) ---

    def key(self, env_id: str) -> int:
        if env_id.startswith(ENV_PREFIX) and env_id[len(ENV_PREFIX) :].isdigit():
            key = int(env_id[len(ENV_PREFIX) :])
            if key in self._configs:
                self._last_used[key] = time.monotonic()
                return key
        raise EnvNotFound(
            f"no environment {env_id!r} (unknown or closed)",
            hint="create one with POST /v1/envs (idle environments expire)",
        )

    def check_pack(self, config: EnvConfig) -> None:
        """Only registered packs (taskpacks/) or packs inside an allow-listed folder: a client must
        not make the service parse any file it can name."""
        try:
            path = config.pack_path().resolve()
        except ConfigError:
            raise PackNotAllowed(f"pack {config.pack[:200]!r} is not available on this service") from None
        if not any(path == root or path.is_relative_to(root) for root in self.pack_dirs):
            raise PackNotAllowed(
                f"pack {config.pack[:200]!r} is not available on this service",
                hint="name a registered env or pack (taskpacks/), or start the service with --pack-dir FOLDER",
            )

    def expire_idle(self) -> int:
        cutoff = time.monotonic() - self.limits.idle_timeout_s
        stale = [k for k in list(self._configs) if self._last_used.get(k, cutoff) < cutoff]
        if stale:
            self.pool.close_envs(stale)
            for key in stale:
                self._configs.pop(key, None)
                self._last_used.pop(key, None)
            self.expired += len(stale)
            log.info("closed %d idle environment(s)", len(stale))
        return len(stale)

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        config, count = env_config_from(body)
        self.check_pack(config)
        self.expire_idle()
        if len(self._configs) + count > self.limits.max_sessions:
            raise LimitExceeded(
                f"environment limit reached ({len(self._configs)} live, {self.limits.max_sessions} at most)",
                hint="close environments you no longer use (DELETE /v1/envs/ID), or raise --max-envs",
            )
        results = self.pool.create([config] * count)
        errors = [r for r in results if isinstance(r, ErrorInfo)]
        keys = [r for r in results if isinstance(r, int)]
        now = time.monotonic()
        for key in keys:
            self._configs[key] = config
            self._last_used[key] = now
        if errors:
            self.pool.close_envs(keys)
            for key in keys:
                self._configs.pop(key, None)
            raise errors[0].to_exception()
        return {"env_ids": [f"{ENV_PREFIX}{k}" for k in keys], "config": config.model_dump(mode="json")}

    def transition(self, key: int, result: Transition | ErrorInfo) -> dict[str, Any]:
        if isinstance(result, ErrorInfo):
            raise result.to_exception()
        return result.to_json(hierarchy=self._configs[key].hierarchy)

    def reset(self, env_id: str, body: ResetBody) -> dict[str, Any]:
        key = self.key(env_id)
        return self.transition(key, self.pool.reset([(key, body.seed, body.options)])[0])

    def step(self, env_id: str, body: StepBody) -> dict[str, Any]:
        key = self.key(env_id)
        return self.transition(key, self.pool.step([(key, body.action)])[0])

    def batch_reset(self, body: BatchReset) -> dict[str, Any]:
        keys = [self._key_or_error(item.env_id) for item in body.resets]
        live = [(i, k) for i, k in enumerate(keys) if isinstance(k, int)]
        results = self.pool.reset([(k, body.resets[i].seed, body.resets[i].options) for i, k in live])
        return {"results": self._batch_results(keys, live, results)}

    def batch_step(self, body: BatchStep) -> dict[str, Any]:
        keys = [self._key_or_error(item.env_id) for item in body.steps]
        live = [(i, k) for i, k in enumerate(keys) if isinstance(k, int)]
        results = self.pool.step([(k, body.steps[i].action) for i, k in live])
        return {"results": self._batch_results(keys, live, results)}

    def snapshot(self, env_id: str) -> dict[str, Any]:
        key = self.key(env_id)
        snap = self.pool.snapshot([key])[0]
        if isinstance(snap, ErrorInfo):
            raise snap.to_exception()
        snap_id = "snap-" + secrets.token_hex(8)
        with self._lock:
            self._snapshots[snap_id] = snap
            while len(self._snapshots) > self.limits.max_snapshots:
                self._snapshots.popitem(last=False)
        return {"snapshot": snap_id, "clone": snap.clone, "task_id": snap.task_id, "step": snap.steps}

    def restore(self, env_id: str, body: RestoreBody) -> dict[str, Any]:
        key = self.key(env_id)
        with self._lock:
            snap = self._snapshots.get(body.snapshot)
        if snap is None:
            raise SnapshotMismatch(
                f"no snapshot {body.snapshot!r}",
                hint=f"snapshots live in the service's memory (the last {self.limits.max_snapshots}); take a new one",
            )
        return self.transition(key, self.pool.restore([(key, snap)])[0])

    def reward(self, env_id: str) -> dict[str, Any]:
        key = self.key(env_id)
        verdict = self.pool.verdict([key])[0]
        if isinstance(verdict, ErrorInfo):
            raise verdict.to_exception()
        cfg = self._configs[key].reward
        clean = verdict["success"] and not verdict.get("side_effects")
        reward = (cfg.success_reward if clean else 0.0) - (
            cfg.side_effect_penalty if verdict.get("side_effects") else 0.0
        )
        return {"reward": reward, "verdict": verdict}

    def close_env(self, env_id: str) -> dict[str, Any]:
        key = self.key(env_id)
        result = self.pool.close_envs([key])[0]
        if isinstance(result, ErrorInfo):
            raise result.to_exception()
        self._configs.pop(key, None)
        self._last_used.pop(key, None)
        return {"closed": env_id}

    def health(self) -> dict[str, Any]:
        workers = [w if isinstance(w, dict) else w.to_json() for w in self.pool.stats()]
        return {
            "ok": all(isinstance(w, dict) and "error" not in w for w in workers),
            "envs": len(self._configs),
            "snapshots": len(self._snapshots),
            "workers": workers,
            "worker_replacements": self.pool.replaced,
        }

    def _key_or_error(self, env_id: str) -> int | ErrorInfo:
        try:
            return self.key(env_id)
        except RealbenchError as exc:
            return ErrorInfo.of(exc)

    def _batch_results(
        self, keys: list[int | ErrorInfo], live: list[tuple[int, int]], results: list[Transition | ErrorInfo]
    ) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [k.to_json() if isinstance(k, ErrorInfo) else {} for k in keys]
        for (i, key), result in zip(live, results, strict=True):
            out[i] = (
                result.to_json()
                if isinstance(result, ErrorInfo)
                else result.to_json(hierarchy=self._configs[key].hierarchy)
            )
        return out


# --- the app ---------------------------------------------------------------------------------

Handler = Callable[[Request], Awaitable[Response]]


def _error(exc: RealbenchError) -> JSONResponse:
    status = 503 if isinstance(exc, WorkerLost) else 500 if isinstance(exc, ServerError) else http_status(exc)
    return JSONResponse(ErrorInfo.of(exc).to_json(), status_code=status)


def _endpoint(fn: Handler) -> Handler:
    @functools.wraps(fn)
    async def wrapper(request: Request) -> Response:
        try:
            return await fn(request)
        except RealbenchError as exc:
            return _error(exc)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(body)"
            return _error(ConfigError(f"invalid request body: field {where!r}: {first['msg']}"))
        except Exception:
            log.exception("rollout service error on %s %s", request.method, request.url.path)
            return JSONResponse(
                {"error": "internal error (traceback logged)", "type": "ServerError", "hint": None},
                status_code=500,
            )

    return wrapper


async def _json(request: Request) -> dict[str, Any]:
    limits: ServerLimits = request.app.state.limits
    data = parse_json_body(await request.body(), limits.max_json_depth)
    if not isinstance(data, dict):
        raise ConfigError("request body must be a JSON object")
    return data


def create_app(service: RolloutService, *, security: ServerSecurity | None = None) -> Starlette:
    def blocking(fn: Callable[..., Any], *args: Any) -> Awaitable[Any]:
        return run_in_threadpool(fn, *args)

    @_endpoint
    async def create(request: Request) -> Response:
        return JSONResponse(await blocking(service.create, await _json(request)))

    @_endpoint
    async def reset(request: Request) -> Response:
        body = ResetBody.model_validate(await _json(request))
        return JSONResponse(await blocking(service.reset, request.path_params["env_id"], body))

    @_endpoint
    async def step(request: Request) -> Response:
        body = StepBody.model_validate(await _json(request))
        return JSONResponse(await blocking(service.step, request.path_params["env_id"], body))

    @_endpoint
    async def snapshot(request: Request) -> Response:
        return JSONResponse(await blocking(service.snapshot, request.path_params["env_id"]))

    @_endpoint
    async def restore(request: Request) -> Response:
        body = RestoreBody.model_validate(await _json(request))
        return JSONResponse(await blocking(service.restore, request.path_params["env_id"], body))

    @_endpoint
    async def reward(request: Request) -> Response:
        return JSONResponse(await blocking(service.reward, request.path_params["env_id"]))

    @_endpoint
    async def close(request: Request) -> Response:
        return JSONResponse(await blocking(service.close_env, request.path_params["env_id"]))

    @_endpoint
    async def batch_reset(request: Request) -> Response:
        body = BatchReset.model_validate(await _json(request))
        return JSONResponse(await blocking(service.batch_reset, body))

    @_endpoint
    async def batch_step(request: Request) -> Response:
        body = BatchStep.model_validate(await _json(request))
        return JSONResponse(await blocking(service.batch_step, body))

    @_endpoint
    async def health(request: Request) -> Response:
        return JSONResponse(await blocking(service.health))

    routes = [
        Route("/v1/health", health),
        Route("/v1/envs", create, methods=["POST"]),
        Route("/v1/envs/{env_id}", close, methods=["DELETE"]),
        Route("/v1/envs/{env_id}/reset", reset, methods=["POST"]),
        Route("/v1/envs/{env_id}/step", step, methods=["POST"]),
        Route("/v1/envs/{env_id}/snapshot", snapshot, methods=["POST"]),
        Route("/v1/envs/{env_id}/restore", restore, methods=["POST"]),
        Route("/v1/envs/{env_id}/reward", reward),
        Route("/v1/batch/reset", batch_reset, methods=["POST"]),
        Route("/v1/batch/step", batch_step, methods=["POST"]),
    ]
    guard = Middleware(GuardMiddleware, security=security or IN_PROCESS_SECURITY, limits=service.limits)
    app = Starlette(routes=routes, middleware=[guard])
    app.state.service = service
    app.state.limits = service.limits
    return app


def serve_rollouts(
    *,
    host: str = "127.0.0.1",
    port: int = 8770,
    workers: int = 2,
    backend: str = "process",
    ray_address: str | None = None,
    imports: tuple[str, ...] = (),
    log_level: str = "warning",
    pack_dirs: tuple[Path | str, ...] = (),
    token_env: str = DEFAULT_TOKEN_ENV,
    allow_hosts: tuple[str, ...] = (),
    limits: ServerLimits | None = None,
    shutdown_timeout_s: float = 20.0,
) -> None:
    """Run the rollout service in the foreground until interrupted (`realbench rollout-service`).
    SIGTERM/SIGINT: in-flight requests get `shutdown_timeout_s`, then workers are stopped (and
    killed if they do not stop within the same time)."""
    import uvicorn

    from clones.server import bind_socket

    security = security_for(host, token_env=token_env, allow_hosts=allow_hosts)
    sock = bind_socket(host, port)
    for folder in pack_dirs:
        if not Path(folder).is_dir():
            sock.close()
            raise ConfigError(f"--pack-dir {folder} is not a folder")
    pool = EnvPool(backend=backend, workers=workers, imports=imports, ray_address=ray_address)
    try:
        log.warning(
            "rollout service on http://%s:%d (%d %s workers)", host, sock.getsockname()[1], workers, backend
        )
        service = RolloutService(pool, limits=limits, pack_dirs=pack_dirs)
        config = server_config(
            create_app(service, security=security),
            service.limits,
            log_level=log_level,
            lifespan="off",
            timeout_graceful_shutdown=max(1, int(shutdown_timeout_s)),
        )
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        pool.close(timeout_s=shutdown_timeout_s)
        sock.close()


class RolloutServer:
    """The rollout service on a free port in a background thread (tests, examples, notebooks).

    ``with RolloutServer(pool) as server: RolloutClient(server.url)`` — stopped on exit; the pool
    stays the caller's.
    """

    def __init__(
        self,
        pool: EnvPool,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        limits: ServerLimits | None = None,
        pack_dirs: tuple[Path | str, ...] = (),
        security: ServerSecurity | None = None,
    ) -> None:
        self.service = RolloutService(pool, limits=limits, pack_dirs=pack_dirs)
        self.security = security if security is not None else security_for(host)
        self.host = host
        self.port = port
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._sock: Any = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self, timeout_s: float = 15.0) -> RolloutServer:
        import time

        import uvicorn

        from clones.server import bind_socket

        self._sock = bind_socket(self.host, self.port)
        self.port = self._sock.getsockname()[1]
        config = server_config(
            create_app(self.service, security=self.security),
            self.service.limits,
            log_level="warning",
            lifespan="off",
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, name="rollout-service", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise ServerError("the rollout service did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
        if self._sock is not None:
            self._sock.close()
        self._server = self._thread = self._sock = None

    def __enter__(self) -> RolloutServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
