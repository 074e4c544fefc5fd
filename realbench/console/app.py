"""The console's web app: server-rendered pages (Jinja2), a little JavaScript, and the JSON API
the pages, tests and scripts use."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from devices.farm.pool import LeaseTimeout
from realbench.actions import parse_action
from realbench.console.capture import capture_screen
from realbench.console.episodes import (
    Stores,
    counterpart_anywhere,
    episode_rows,
    episode_view,
    run_summaries,
    task_rows,
    verdict_rows,
)
from realbench.console.labels import LabelQueue
from realbench.console.phones import ConsolePhones
from realbench.console.security import CONSOLE_LIMITS
from realbench.console.video_feed import stream as video_stream
from realbench.errors import (
    ActionError,
    BoundaryBlocked,
    ConfigError,
    DeviceError,
    RealbenchError,
    StoreError,
)
from realbench.http_guard import BodyError, parse_json_body
from realbench.store_lock import StoreLockedError

log = logging.getLogger(__name__)

HERE = Path(__file__).parent
LIVE_WIDTH = 540
MAX_EPISODE_ROWS = 1000  # rows of one store page; the per-task table counts them all


@dataclass
class ConsoleConfig:
    phones: ConsolePhones | None
    stores: Stores
    captures: Path
    plans: list[Path] = field(default_factory=list)
    recorder: Any = None  # realbench.console.recorder.Recorder when recipes are available


def _error(exc: RealbenchError) -> JSONResponse:
    body: dict[str, Any] = {"error": exc.message, "hint": exc.hint}
    if isinstance(exc, BoundaryBlocked):
        return JSONResponse({**body, "boundary": exc.control}, status_code=409)
    if isinstance(exc, LeaseTimeout | StoreLockedError):
        return JSONResponse(body, status_code=423)
    if isinstance(exc, BodyError):
        return JSONResponse(body, status_code=exc.http_status)
    if isinstance(exc, ActionError | ConfigError):
        return JSONResponse(body, status_code=400)
    if isinstance(exc, StoreError):
        return JSONResponse(body, status_code=404)
    if isinstance(exc, DeviceError):
        return JSONResponse(body, status_code=502)
    return JSONResponse(body, status_code=400)


async def _call(fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
    return await run_in_threadpool(fn, *args, **kw)


async def _json(request: Request) -> dict[str, Any]:
    # Parsed here, not by request.json(): JSON nested past the limit is a 400, not a RecursionError.
    data = parse_json_body(await request.body(), CONSOLE_LIMITS.max_json_depth)
    if not isinstance(data, dict):
        raise ConfigError("the request body must be a JSON object")
    return data


def build_app(cfg: ConsoleConfig) -> Starlette:
    env = Environment(
        loader=FileSystemLoader(str(HERE / "templates")), autoescape=select_autoescape(["html", "j2"])
    )
    env.filters["q"] = lambda s: quote(str(s), safe="")
    queue = LabelQueue(cfg.stores, cfg.plans)

    def page(template: str, **ctx: Any) -> HTMLResponse:
        has_phones = cfg.phones is not None
        return HTMLResponse(
            env.get_template(template).render(
                has_phones=has_phones, stores=cfg.stores.names(), recorder=cfg.recorder is not None, **ctx
            )
        )

    def phones() -> ConsolePhones:
        if cfg.phones is None:
            raise ConfigError("the console was started without a rig", hint="pass --rig R")
        return cfg.phones

    def guarded(handler: Callable[[Request], Any]) -> Callable[[Request], Any]:
        async def wrapper(request: Request) -> Response:
            try:
                result: Response = await handler(request)
                return result
            except RealbenchError as exc:
                return _error(exc)

        return wrapper

    # --- pages ------------------------------------------------------------------------------

    async def index(request: Request) -> Response:
        return RedirectResponse("/fleet" if cfg.phones is not None else "/runs", status_code=303)

    async def fleet_page(request: Request) -> Response:
        return page("fleet.html.j2", title="Fleet", rig=cfg.phones.pool.rig.name if cfg.phones else None)

    async def phone_page(request: Request) -> Response:
        serial = request.path_params["serial"]
        p = phones()
        p.pool.record(serial)
        apps = [{"package": a.package, "name": a.name} for a in p.pool.rig.apps]
        packs = cfg.recorder.pack_choices() if cfg.recorder is not None else []
        return page(
            "phone.html.j2",
            title=f"Phone {serial}",
            serial=serial,
            apps=apps,
            live_width=LIVE_WIDTH,
            packs=packs,
        )

    async def runs_page(request: Request) -> Response:
        stores = []
        for i, name in enumerate(cfg.stores.names()):
            store = cfg.stores.get(name)
            stores.append({"index": i, "name": name, "runs": await _call(run_summaries, store)})
        return page("runs.html.j2", title="Runs", store_list=stores)

    async def store_page(request: Request) -> Response:
        idx = request.path_params["index"]
        store = cfg.stores.get(str(idx))
        f = {k: request.query_params.get(k, "") for k in ("outcome", "model", "target", "run")}
        rows = await _call(episode_rows, store, **f)
        frame = await _call(store.episodes_frame)
        choices = {
            "outcome": sorted(frame["outcome"].astype(str).unique()) if not frame.empty else [],
            "model": sorted(frame["model"].astype(str).unique()) if not frame.empty else [],
            "target": sorted(frame["env"].astype(str).unique()) if not frame.empty else [],
        }
        return page(
            "store.html.j2",
            title=f"Store {cfg.stores.names()[idx]}",
            index=idx,
            name=cfg.stores.names()[idx],
            rows=rows,
            tasks=task_rows(rows),
            shown=MAX_EPISODE_ROWS,
            filters=f,
            choices=choices,
        )

    async def episode_page(request: Request) -> Response:
        idx = request.path_params["index"]
        store = cfg.stores.get(str(idx))
        episode_id = request.query_params.get("id", "")
        this = await _call(episode_view, store, episode_id)
        # The other side may live in another of the console's stores (clone and phone runs are
        # usually written to separate stores).
        found = await _call(counterpart_anywhere, cfg.stores, store, episode_id)
        other = await _call(episode_view, found[0], found[1]) if found else None
        clone, phone = (this, other) if this["target"] == "clone" else (other, this)
        verdicts = await _call(verdict_rows, store, episode_id)
        return page(
            "episode.html.j2",
            title=f"Episode {episode_id}",
            index=idx,
            episode=this,
            clone=clone,
            phone=phone,
            verdicts=verdicts,
        )

    async def label_page(request: Request) -> Response:
        return page(
            "label.html.j2",
            title="Labelling",
            store=request.query_params.get("store", ""),
            labeller=request.query_params.get("labeller", ""),
        )

    # --- phone API --------------------------------------------------------------------------

    async def api_phones(request: Request) -> Response:
        check = request.query_params.get("check", "1") != "0"
        return JSONResponse(await _call(phones().fleet, check=check))

    async def api_screen(request: Request) -> Response:
        width = int(request.query_params.get("width", "0") or 0) or None
        data, source = await _call(phones().live_frame, request.path_params["serial"], width)
        headers = {
            "cache-control": "no-store",
            "x-frame-source": source.source,
            "x-frame-note": source.note.encode("ascii", "replace").decode(),
        }
        return Response(data, media_type="image/jpeg", headers=headers)

    async def api_video(request: Request) -> Response:
        """scrcpy's H.264 as it is, for the page's own decoder (docs/console.md); 503 with the
        reason when there is no video (the page then shows the JPEG stream)."""
        serial = request.path_params["serial"]
        p = phones()
        live = await _call(p.live_packets, serial)
        if live is None:
            status = p.video.status(serial)
            return JSONResponse(
                {"error": status.note, "source": status.source},
                status_code=503,
                headers={"cache-control": "no-store"},
            )
        client, feed = live
        return StreamingResponse(
            video_stream(feed, client.width, client.height, lambda: client.alive),
            media_type="application/octet-stream",
            headers={
                "cache-control": "no-store",
                "x-content-type-options": "nosniff",
                "x-frame-source": "scrcpy",
            },
        )

    async def api_hierarchy(request: Request) -> Response:
        xml = await _call(phones().hierarchy, request.path_params["serial"])
        return Response(xml, media_type="application/xml", headers={"cache-control": "no-store"})

    async def api_inspect(request: Request) -> Response:
        try:
            x, y = int(request.query_params["x"]), int(request.query_params["y"])
        except (KeyError, ValueError):
            raise ConfigError("inspect needs integer x and y (0–1000)") from None
        return JSONResponse(await _call(phones().inspect, request.path_params["serial"], x, y))

    async def api_act(request: Request) -> Response:
        data = await _json(request)
        confirm = data.pop("confirm", None)
        operator = str(data.pop("operator", "") or "")
        raw = data.pop("action") if "action" in data else data
        action = parse_action(raw)
        serial = request.path_params["serial"]
        if cfg.recorder is not None:
            await _call(cfg.recorder.before_action, serial, action)
        error: Exception | None = None
        try:
            timing = await _call(
                phones().act, serial, action, confirm=str(confirm) if confirm else None, operator=operator
            )
        except RealbenchError as exc:
            error = exc
            raise
        finally:
            if cfg.recorder is not None:
                cfg.recorder.after_action(serial, error)
        body: dict[str, Any] = {"ok": True, "action": action.model_dump(mode="json")}
        if timing is not None:
            body["ms"] = timing.to_ms()  # the interlock, the input, the wait for its effect
        return JSONResponse(body)

    async def api_lease(request: Request) -> Response:
        data = await _json(request)
        lease = await _call(phones().lease, request.path_params["serial"], str(data.get("operator") or ""))
        return JSONResponse({"leased": True, "holder": lease.holder})

    async def api_release(request: Request) -> Response:
        await _json(request)
        await _call(phones().release, request.path_params["serial"])
        return JSONResponse({"leased": False})

    async def api_start(request: Request) -> Response:
        data = await _json(request)
        serial, package = request.path_params["serial"], str(data.get("package", ""))
        await _call(phones().start_app, serial, package)
        if cfg.recorder is not None:
            cfg.recorder.opened(serial, package)
        return JSONResponse({"ok": True})

    async def api_capture(request: Request) -> Response:
        data = await _json(request)
        serial = request.path_params["serial"]
        p = phones()
        rec = p.pool.record(serial)
        path = await _call(
            capture_screen,
            p.pool.phone(serial),
            cfg.captures,
            label=str(data.get("label") or ""),
            profile=rec.profile.model_dump(mode="json"),
            redact=p.redact,
        )
        return JSONResponse({"path": str(path)})

    # --- labelling API ----------------------------------------------------------------------

    async def api_label_next(request: Request) -> Response:
        store = request.query_params.get("store", "")
        labeller = request.query_params.get("labeller", "")
        item = await _call(queue.next, store, labeller)
        return JSONResponse({"episode": None, "done": True} if item is None else {**item, "done": False})

    async def api_label(request: Request) -> Response:
        data = await _json(request)
        success = data.get("success")
        if success is not None and not isinstance(success, bool):
            raise ConfigError("success must be true, false or null (unsure)")
        result = await _call(
            queue.save,
            str(data.get("store", "")),
            str(data.get("episode", "")),
            str(data.get("labeller", "")),
            success,
            str(data.get("note") or ""),
        )
        return JSONResponse(result)

    async def api_agreement(request: Request) -> Response:
        return JSONResponse(await _call(queue.agreement, request.query_params.get("store", "")))

    routes = [
        Route("/", index),
        Route("/fleet", guarded(fleet_page)),
        Route("/phone/{serial}", guarded(phone_page)),
        Route("/runs", guarded(runs_page)),
        Route("/runs/{index:int}", guarded(store_page)),
        Route("/runs/{index:int}/episode", guarded(episode_page)),
        Route("/label", guarded(label_page)),
        Route("/api/phones", guarded(api_phones)),
        Route("/api/phones/{serial}/screen", guarded(api_screen)),
        Route("/api/phones/{serial}/video", guarded(api_video)),
        Route("/api/phones/{serial}/hierarchy", guarded(api_hierarchy)),
        Route("/api/phones/{serial}/inspect", guarded(api_inspect)),
        Route("/api/phones/{serial}/act", guarded(api_act), methods=["POST"]),
        Route("/api/phones/{serial}/lease", guarded(api_lease), methods=["POST"]),
        Route("/api/phones/{serial}/release", guarded(api_release), methods=["POST"]),
        Route("/api/phones/{serial}/start", guarded(api_start), methods=["POST"]),
        Route("/api/phones/{serial}/capture", guarded(api_capture), methods=["POST"]),
        Route("/api/label/next", guarded(api_label_next)),
        Route("/api/label/agreement", guarded(api_agreement)),
        Route("/api/label", guarded(api_label), methods=["POST"]),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    if cfg.recorder is not None:
        routes[-1:-1] = cfg.recorder.routes(guarded, _json, _call)
    return Starlette(routes=routes)
