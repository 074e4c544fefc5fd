"""Bringing many clone environments up at once: they share the pool's bounded contexts (one
renderer each), each still shows its own server session, and one environment's teardown leaves the
others' connections to the server working."""

from __future__ import annotations

import asyncio
import io
import json
import os
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from clones.base import get_clone
from devices.clone_browser import BrowserPool, Emulation, Isolation, descendant_pids
from devices.clone_device import CloneDevice
from devices.clone_target import CloneTarget
from realbench.actions import action_from_json
from realbench.errors import ConfigError, DeviceError
from realbench.taskpack import TaskPack


@pytest.mark.browser
def test_environments_set_up_at_once_share_the_bounded_contexts(clone_server, toy_pack: TaskPack):
    instance = toy_pack.tasks[0].instantiate(seed=0, today=date(2026, 3, 2))
    with BrowserPool(renderers=2) as pool:
        targets = [CloneTarget(toy_pack, clone_server.url, browser=pool, scale=1.0) for _ in range(6)]
        try:
            with ThreadPoolExecutor(6) as ex:
                list(ex.map(lambda t: t.setup(instance), targets))
            # Chromium's own list of contexts: the bound holds however many set up together
            assert len(pool._browser.contexts) == 2
            sessions = [t.session for t in targets]
            assert len(set(sessions)) == 6
            for target, session in zip(targets, sessions, strict=True):
                assert target.device._page.url.endswith(f"/s/{session}")
            targets[0].teardown()
            # the others still reach the server (the HTTP client is shared, not closed with one)
            targets[1].setup(instance)
            assert targets[1].state()["ui"]["route"]
        finally:
            for target in targets[1:]:
                target.teardown()


def _renderer_pids() -> set[int]:
    out = set()
    for pid in descendant_pids(os.getpid()):
        try:
            if b"--type=renderer" in Path(f"/proc/{pid}/cmdline").read_bytes():
                out.add(pid)
        except OSError:
            continue
    return out


@pytest.mark.browser
def test_pages_of_shared_contexts_never_start_a_renderer_of_their_own(clone_server, toy_pack: TaskPack):
    """A page that started at about:blank got a renderer process of its own until its navigation
    left it (a process start per environment, most of a blank page's cost). Every renderer process
    Chromium starts while 16 environments come up is watched from /proc."""
    instance = toy_pack.tasks[0].instantiate(seed=0, today=date(2026, 3, 2))
    with BrowserPool(renderers=1) as pool:
        seen: set[int] = set()
        stop = threading.Event()

        def watch() -> None:
            while not stop.is_set():
                seen.update(_renderer_pids())
                time.sleep(0.005)

        watcher = threading.Thread(target=watch)
        watcher.start()
        targets = [CloneTarget(toy_pack, clone_server.url, browser=pool, scale=1.0) for _ in range(16)]
        try:
            with ThreadPoolExecutor(4) as ex:
                list(ex.map(lambda t: t.setup(instance), targets))
        finally:
            stop.set()
            watcher.join()
            for target in targets:
                target.teardown()
        # the site's renderer, the context's probe page and Chromium's own spare ones: 5 here
        assert len(seen) <= 8, f"{len(seen)} renderer processes for 16 pages"


@pytest.mark.browser
@pytest.mark.parametrize("isolation", list(Isolation))
def test_pages_at_one_url_at_once_are_each_their_own(clone_server, toy_pack: TaskPack, isolation):
    instance = toy_pack.tasks[0].instantiate(seed=0, today=date(2026, 3, 2))
    with BrowserPool(renderers=1, isolation=isolation) as pool:
        target = CloneTarget(toy_pack, clone_server.url, browser=pool, scale=1.0)
        try:
            target.setup(instance)
            url = f"{clone_server.url}/s/{target.session}"

            async def open_three() -> list:
                return list(
                    await asyncio.gather(*(pool.open_page(Emulation(scale=1.0), url) for _ in range(3)))
                )

            opened = pool.call(open_three())
            assert len({id(o.page) for o in opened}) == 3
            assert all(o.status == 200 and o.page.url == url for o in opened)
            assert all(pool.call(o.page.evaluate("() => !!window.__rb")) for o in opened)
            for o in opened:
                pool.call(o.context.close() if o.owns_context else o.page.close())
        finally:
            target.teardown()


@pytest.mark.browser
@pytest.mark.parametrize("isolation", list(Isolation))
def test_a_page_for_an_unknown_session_names_the_servers_answer(clone_server, toy_pack: TaskPack, isolation):
    with BrowserPool(isolation=isolation) as pool:
        device = CloneDevice(
            pool, clone_server.url, get_clone(toy_pack.clone), emulation=Emulation(scale=1.0)
        )
        try:
            with pytest.raises(DeviceError, match="answered 404"):
                device.open("0000000000000000")
        finally:
            device.close()


@pytest.mark.browser
def test_pages_showing_one_screen_give_the_same_pixels_capture_after_capture(
    clone_server, toy_pack: TaskPack
):
    """Pages of a shared context at a model's resolution, all showing one screen, captured three
    times each, give one image. (Pages created by Chromium at their URL, before the context's
    emulation reached them, alternated between two rasterisations of the list's text.)"""
    instance = toy_pack.tasks[0].instantiate(seed=0, today=date(2026, 3, 2))
    emulation = Emulation.for_short_side(448)
    open_list = action_from_json('{"type": "click", "x": 500, "y": 180}')
    with BrowserPool(renderers=1) as pool:
        targets = [
            CloneTarget(toy_pack, clone_server.url, browser=pool, emulation=emulation) for _ in range(8)
        ]
        try:
            with ThreadPoolExecutor(3) as ex:
                list(ex.map(lambda t: t.setup(instance), targets))
            images = []
            for target in targets:
                target.device.act(open_list)
                assert target.state()["ui"]["route"] == "list"
                for _ in range(3):
                    shot = target.device.screenshot()
                    assert (shot.width, shot.height) == emulation.pixel_size
                    images.append(np.asarray(Image.open(io.BytesIO(shot.data)).convert("RGB")))
            differing = sum(not np.array_equal(images[0], image) for image in images[1:])
            assert differing == 0, f"{differing} of {len(images) - 1} captures differ from the first"
        finally:
            for target in targets:
                target.teardown()


@pytest.mark.browser
def test_opening_a_page_makes_no_other_page_recompute_its_style(clone_server, toy_pack: TaskPack):
    """Every page Playwright opened used to carry media-feature overrides (light colour scheme,
    no reduced motion, ...), and Chromium applies such an override to every page of the renderer:
    each new page restyled and repainted all the others, so bringing N environments up cost N².
    Chromium's own counter in the first page says whether the pages opened after it touched it."""
    instance = toy_pack.tasks[0].instantiate(seed=0, today=date(2026, 3, 2))

    async def style_recalcs(cdp) -> float:
        metrics = (await cdp.send("Performance.getMetrics"))["metrics"]
        return next(m["value"] for m in metrics if m["name"] == "RecalcStyleCount")

    with BrowserPool(renderers=1) as pool:
        targets = [CloneTarget(toy_pack, clone_server.url, browser=pool, scale=1.0) for _ in range(9)]
        try:
            targets[0].setup(instance)
            page = targets[0].device._page
            cdp = pool.call(page.context.new_cdp_session(page))
            pool.call(cdp.send("Performance.enable"))
            before = pool.call(style_recalcs(cdp))
            for target in targets[1:]:
                target.setup(instance)
            after = pool.call(style_recalcs(cdp))
            assert after - before <= 2, f"the first page recomputed its style {after - before:.0f} times"
        finally:
            for target in targets:
                target.teardown()


def test_a_browser_drawing_at_one_scale_refuses_an_emulation_at_another():
    pool = BrowserPool(render_scale=Emulation.for_short_side(448).scale)
    assert f"--force-device-scale-factor={pool.render_scale!r}" in pool.args
    assert pool.captures_as_drawn(Emulation.for_short_side(448))
    with pytest.raises(ConfigError, match="draws at scale"):
        pool.captures_as_drawn(Emulation.for_short_side(256))
    assert not BrowserPool().captures_as_drawn(Emulation.for_short_side(256))


# Chromium's trace categories with its main-thread paints and its raster workers' tasks
TIMELINE = ["devtools.timeline", "disabled-by-default-devtools.timeline"]


@pytest.mark.browser
@pytest.mark.parametrize("drawn_at_scale", [False, True], ids=["scaled-clip", "as-drawn"])
def test_captures_of_an_unchanged_page_repaint_only_through_a_scaled_clip(
    clone_server, toy_pack: TaskPack, drawn_at_scale: bool
):
    """A page that idles at one pixel per CSS px is painted and rasterised again at its scale for
    every capture; a browser drawing at the emulation's scale captures what it has drawn. Chromium's
    own trace of six captures of an unchanged page says which happened."""
    instance = toy_pack.tasks[0].instantiate(seed=0, today=date(2026, 3, 2))
    emulation = Emulation.for_short_side(448)
    captures = 6
    with BrowserPool(renderers=1, render_scale=emulation.scale if drawn_at_scale else None) as pool:
        target = CloneTarget(toy_pack, clone_server.url, browser=pool, emulation=emulation)
        try:
            target.setup(instance)
            page = target.device._page
            assert pool.call(page.evaluate("devicePixelRatio")) == pytest.approx(
                emulation.scale if drawn_at_scale else 1.0, rel=1e-6
            )
            target.device.screenshot()
            pool.call(pool._browser.start_tracing(page=page, categories=TIMELINE))
            for _ in range(captures):
                shot = target.device.screenshot()
                assert (shot.width, shot.height) == emulation.pixel_size
            trace = json.loads(pool.call(pool._browser.stop_tracing()))
        finally:
            target.teardown()
    events = Counter(e["name"] for e in trace["traceEvents"] if e.get("ph") == "X")
    if drawn_at_scale:
        assert events["Paint"] == 0 and events["RasterTask"] == 0, events
    else:  # the contrast that shows the trace sees re-renders at all (a loaded machine may merge
        # two captures' paints into one frame; each capture still rasterises)
        assert events["Paint"] > 0 and events["RasterTask"] >= captures, events
