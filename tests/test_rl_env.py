"""Clone tasks as Gymnasium environments: the env checker, verifier rewards, episode ends,
snapshot/restore branching, bad input and a crashed browser. One host (browser + clone server)
for the module; environments on the toy clone."""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import devices.rl  # noqa: F401  (registers the Gymnasium ids)
from devices.clone_device import CloneDevice
from devices.rl import cdp
from devices.rl.browser import chromium_command_lines, chromium_processes, process_type, rollup_mib
from devices.rl.config import EnvConfig
from devices.rl.core import RLCloneDevice
from devices.rl.errors import EnvNotFound, EpisodeOver, ErrorInfo, SnapshotMismatch
from devices.rl.gym_env import RealbenchEnv
from devices.rl.host import (
    ALLOCATOR_CHECKS_OFF_ARG,
    JS_FLAGS_ARG,
    EnvHost,
    ResetRequest,
    StepRequest,
    acquire_shared_host,
    release_shared_host,
)
from devices.rl.spaces import screen_size
from devices.rl.transitions import EnvObservation
from realbench.errors import ActionError, ConfigError, RealbenchError
from realbench.golden import GoldenAgent
from realbench.hierarchy import Hierarchy, Selector
from realbench.observation import ImageFormat
from tests.rl_support import OTHER_PACK, golden_action, write_pack

pytestmark = pytest.mark.browser

CLICK_LIST = '{"type": "click", "x": 500, "y": 180}'
# the colour of the pixel `redrawBehind` recolours
_BEHIND_COLOUR = "() => document.querySelector('[data-rb-behind]').style.backgroundColor"


@pytest.fixture(scope="module", autouse=True)
def toys(other_toy):
    yield


@pytest.fixture(scope="module")
def packs(tmp_path_factory):
    root = tmp_path_factory.mktemp("packs")
    return {"toy": str(write_pack(root / "toy")), "other": str(write_pack(root / "other", OTHER_PACK))}


@pytest.fixture(scope="module")
def host():
    # the process-wide host, so environments made through gym.make (which cannot take a host
    # argument: it deep-copies its kwargs) share this module's browser
    h = acquire_shared_host()
    yield h
    release_shared_host(h)


# Without the screen cache: the tests that compare two environments' pixels compare captures.
@pytest.fixture(scope="module")
def env(host, packs):
    e = RealbenchEnv(packs["toy"], "buy-item", host=host, screen_cache=False)
    yield e
    e.close()


@pytest.fixture(scope="module")
def twin(host, packs):
    e = RealbenchEnv(packs["toy"], "buy-item", host=host, screen_cache=False)
    yield e
    e.close()


def _obs_of(env: RealbenchEnv) -> EnvObservation:
    assert env._last is not None
    return env._last.observation


def _golden_episode(env: RealbenchEnv, seed: int) -> tuple[float, dict]:
    _, info = env.reset(seed=seed)
    agent = GoldenAgent()
    agent.reset(env._host.env(env.env_id)._episode.instance)
    total = 0.0
    for _ in range(info["max_steps"]):
        _, reward, terminated, truncated, info = env.step(golden_action(agent, _obs_of(env)))
        total += float(reward)
        if terminated or truncated:
            return total, info
    raise AssertionError("the golden plan did not end the episode")


def _reset_differences(env: gym.Env) -> list[str]:
    """The checker's reset sequence again, saying which parts of which observations differ (the
    pixels' count and box, or the hierarchy's first differing line)."""
    first = [env.reset(seed=123)[0], env.reset()[0]]
    again = [env.reset(seed=123)[0], env.reset()[0]]
    found = []
    for n, (a, b) in enumerate(zip(first, again, strict=True)):
        changed = np.argwhere((a["screenshot"] != b["screenshot"]).any(axis=-1))
        if len(changed):
            found.append(f"obs {n}: {len(changed)} pixels in {changed.min(0)}..{changed.max(0)}")
        lines = zip(a["hierarchy"].splitlines(), b["hierarchy"].splitlines(), strict=False)
        line = next(((x, y) for x, y in lines if x != y), None)
        if line is not None or a["hierarchy"] != b["hierarchy"]:
            found.append(f"obs {n}: hierarchy differs at {line}")
    return found or ["none the second time"]


def test_env_checker_passes_through_gym_make(host, packs):
    env = gym.make("realbench/clone-v1", pack=packs["toy"], task_id="buy-item")
    assert env.unwrapped._host is host
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # the checker's warnings are failures here
            try:
                check_env(env.unwrapped, skip_render_check=True)
            except AssertionError as exc:
                raise AssertionError(
                    f"{exc}\nhow the checker's resets differ: {_reset_differences(env)}"
                ) from exc
        obs, info = env.reset(seed=1)
        assert obs["screenshot"].shape == env.observation_space["screenshot"].shape == (995, 448, 3)
        assert obs["screenshot"].dtype == np.uint8 and obs["screenshot"].std() > 0
        assert "商品列表" in obs["hierarchy"]
        assert info["instruction"].startswith("购买商品") and info["task_id"] == "buy-item"
    finally:
        env.close()


def test_env_checker_passes_with_encoded_screenshots(host, packs):
    env = RealbenchEnv(packs["toy"], "buy-item", host=host, image="jpeg", hierarchy=False, short_side=256)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            check_env(env, skip_render_check=True)
        obs, _ = env.reset(seed=0)
        assert set(obs) == {"screenshot"}
        assert bytes(obs["screenshot"][:2]) == b"\xff\xd8"
        width, height = screen_size(env.config)
        pixels = EnvObservation(obs["screenshot"].tobytes(), ImageFormat.JPEG, width, height).pixels()
        assert pixels.shape == (height, width, 3)
    finally:
        env.close()


@pytest.mark.parametrize("shaped", [False, True])
def test_golden_plan_earns_the_verifier_reward(host, packs, shaped):
    env = RealbenchEnv(packs["toy"], "buy-item", host=host, reward={"shaped": shaped})
    try:
        total, info = _golden_episode(env, seed=3)
    finally:
        env.close()
    assert info["outcome"] == "success" and info["end_reason"] == "boundary"
    assert "购买" in info["boundary"]
    assert info["verdict"]["success"] is True
    # shaped: the progress potential goes 0 -> 1 on top of the success reward
    assert total == pytest.approx(2.0 if shaped else 1.0)


def test_pages_open_without_a_screen_and_the_first_reset_shows_one(host, packs):
    e = RealbenchEnv(packs["toy"], "buy-item", host=host)
    try:
        device = host.env(e.env_id)._device

        def app_html() -> str:
            return device._run(device._page_eval("() => document.getElementById('app').innerHTML"), "app")

        assert app_html() == ""
        obs, _ = e.reset(seed=0)
        assert "商品列表" in obs["hierarchy"] and "商品列表" in app_html()
    finally:
        e.close()


def test_wrong_purchase_and_giving_up_earn_nothing(env):
    env.reset(seed=3, options={"instance_seed": 3})
    item = env._host.env(env.env_id)._episode.instance.params["item"]
    wrong = 7 if item != "07" else 8
    env.step(CLICK_LIST)
    # tap the wrong row, then buy it: the verifier sees an order, but not the asked-for item
    hierarchy = _obs_of(env).hierarchy
    assert hierarchy is not None and f"商品{wrong:02d}" in hierarchy
    node = Hierarchy(hierarchy).find_one(Selector(text=f"商品{wrong:02d}"))
    assert node is not None
    w, h = _obs_of(env).width, _obs_of(env).height
    cx, cy = node.bounds.center
    env.step(f'{{"type": "click", "x": {round(cx * 1000 / (w - 1))}, "y": {round(cy * 1000 / (h - 1))}}}')
    _, reward, terminated, truncated, info = env.step('{"type": "terminate", "status": "success"}')
    assert (reward, terminated, truncated) == (0.0, True, False)
    assert info["outcome"] == "failure" and info["end_reason"] == "terminate"
    assert not info["verdict"]["success"]


def test_step_budget_truncates(env):
    env.reset(seed=0)
    for _ in range(7):
        _, reward, terminated, truncated, _ = env.step('{"type": "key", "key": "back"}')
        assert not (terminated or truncated)
    _, reward, terminated, truncated, info = env.step('{"type": "key", "key": "back"}')
    assert truncated and not terminated and reward == 0.0
    assert info["outcome"] == "step_budget" and info["step"] == info["max_steps"] == 8
    with pytest.raises(EpisodeOver):
        env.step(CLICK_LIST)
    with pytest.raises(EpisodeOver, match="snapshot"):
        env.snapshot()


def test_tasks_are_drawn_from_the_pack_by_seed_or_chosen(host, packs):
    env = RealbenchEnv(packs["toy"], host=host)  # no task fixed
    try:
        drawn = [env.reset(seed=s)[1]["task_id"] for s in (1, 2, 3, 4, 1)]
        assert drawn[0] == drawn[-1] and set(drawn) == {"buy-item", "search"}
        _, info = env.reset(options={"task_id": "search"})
        assert info["task_id"] == "search" and info["instruction"] == "搜索玩具"
    finally:
        env.close()


def test_format_errors_are_penalised_and_end_the_episode(host, packs):
    env = RealbenchEnv(packs["toy"], "buy-item", host=host, reward={"format_error_penalty": 0.25})
    try:
        env.reset(seed=0)
        for _ in range(2):
            _, reward, terminated, _, info = env.step('{"type": "tap"}')
            assert reward == -0.25 and not terminated and "type" in info["format_error"]
        _, reward, terminated, truncated, info = env.step("not json")
        assert terminated and not truncated and reward == -0.25
        assert info["outcome"] == "format_error"
    finally:
        env.close()


def test_snapshot_restore_branches_identically(env, twin):
    env.reset(seed=5)
    env.step(CLICK_LIST)
    snap = env.snapshot()
    assert snap.steps == 1 and snap.state["ui"]["route"] == "list"
    obs_a, info_a = env.restore(snap)
    obs_b, info_b = twin.restore(snap)
    assert np.array_equal(obs_a["screenshot"], obs_b["screenshot"])
    assert obs_a["hierarchy"] == obs_b["hierarchy"]
    assert info_a["step"] == info_b["step"] == 1 and info_a["instruction"] == info_b["instruction"]
    state_a = env._host.env(env.env_id)._session.state
    state_b = twin._host.env(twin.env_id)._session.state
    assert state_a == state_b and state_a is not state_b
    # the branches evolve independently from the shared state
    env.step('{"type": "key", "key": "back"}')
    assert env._host.env(env.env_id)._session.state["ui"]["route"] == "home"
    assert twin._host.env(twin.env_id)._session.state["ui"]["route"] == "list"
    # and restoring again brings the first branch back
    obs_c, _ = env.restore(snap)
    assert np.array_equal(obs_c["screenshot"], obs_b["screenshot"])


def test_restore_of_another_clones_snapshot_is_refused(host, packs, env):
    other = RealbenchEnv(packs["other"], "buy-item", host=host)
    try:
        other.reset(seed=0)
        snap = other.snapshot()
        env.reset(seed=0)
        with pytest.raises(SnapshotMismatch, match="toy_other"):
            env.restore(snap)
        _, _, terminated, _, _ = env.step(CLICK_LIST)  # env is unaffected
        assert not terminated
    finally:
        other.close()


def test_bad_input_is_a_clear_error_and_harms_nothing(host, packs, env):
    fresh = RealbenchEnv(packs["toy"], "buy-item", host=host)
    with pytest.raises(EpisodeOver, match="reset"):
        fresh.step(CLICK_LIST)
    fresh.close()
    with pytest.raises(RealbenchError, match="closed"):
        fresh.step(CLICK_LIST)
    assert isinstance(host.step([StepRequest(999, CLICK_LIST)])[0], ErrorInfo)
    with pytest.raises(EnvNotFound):
        host.env(999)
    env.reset(seed=0)
    with pytest.raises(ActionError):
        env.step(42)  # not an element of the action space at all: a caller bug, not a format error
    _, _, _, _, info = env.step(CLICK_LIST)
    assert info["step"] == 1 and info["format_error"] is None
    with pytest.raises(ConfigError, match="reset options"):
        env.reset(options={"bogus": 1})
    with pytest.raises(ConfigError, match="no task"):
        env.reset(options={"task_id": "nope"})


async def _crash(device: Any) -> None:
    await (await device._session_cdp()).send("Page.crash")


def test_crashed_renderer_aborts_the_episodes_it_hosted(host, packs):
    envs = [RealbenchEnv(packs["toy"], "buy-item", host=host) for _ in range(3)]
    try:
        for e in envs:
            e.reset(seed=0)
        devices = [host.env(e.env_id)._device for e in envs]
        with pytest.raises(RealbenchError):  # the crash answers with an error, as a crash would
            devices[0].pool.call(_crash(devices[0]), timeout=5)
        # same context, same renderer (a direct page's context is Chromium's id; a Playwright
        # page's, Playwright's object)
        context = [getattr(d._page, "context_id", None) or d._context for d in devices]
        shared = [c is context[0] or c == context[0] for c in context]
        results = [e.step(CLICK_LIST) for e in envs]
        assert [r[4]["aborted"] for r in results] == shared and shared[0]
        assert all(r[3] for r, s in zip(results, shared, strict=True) if s)  # truncated, not terminated
        for e in envs:
            if e._last is not None and e._last.done:
                e.reset(seed=0)
        assert not any(e.step(CLICK_LIST)[4]["aborted"] for e in envs)
    finally:
        for e in envs:
            e.close()


@pytest.mark.parametrize(
    "action", [CLICK_LIST, '{"type": "key", "key": "back"}', '{"type": "type", "text": "x"}']
)
def test_a_step_whose_event_the_server_refuses_aborts_with_the_pages_reason(host, packs, action, caplog):
    """A step acts and observes in one evaluation: an event the page could not deliver still ends
    the step there (no observation of a screen the server never sent), as two evaluations did."""
    e = RealbenchEnv(packs["toy"], "buy-item", host=host)
    try:
        e.reset(seed=0)
        core = host.env(e.env_id)
        before = _obs_of(e)
        host.drop_session(core._device.session)
        with caplog.at_level("WARNING"):
            _, reward, terminated, truncated, info = e.step(action)
        assert info["aborted"] and truncated and not terminated and reward == 0
        assert "could not reach the clone server" in caplog.text  # (over the socket or HTTP: 404)
        assert _obs_of(e) is before  # the last observation stands
    finally:
        e.close()


def test_environments_at_two_resolutions_get_a_browser_each_drawing_at_their_scale_until_the_last_closes(
    host, packs
):
    """A browser draws at one scale (its pages are captured as drawn), so a host serves a second
    resolution from a second browser; both kinds of environment step side by side. (449 px: the
    long side, 997.2 px, is rounded up by Chromium as by `Emulation.pixel_size`.)"""
    envs = [
        RealbenchEnv(packs["toy"], "buy-item", host=host, short_side=side, hierarchy=False)
        for side in (448, 449)
    ]
    try:
        for e in envs:
            obs, _ = e.reset(seed=0)
            width, height = screen_size(e.config)
            assert obs["screenshot"].shape == (height, width, 3)
            obs, _, _, _, info = e.step(CLICK_LIST)
            assert info["aborted"] is False and obs["screenshot"].shape == (height, width, 3)
        browsers = [host.browser(host.env(e.env_id).emulation) for e in envs]
        assert browsers[0] is not None and browsers[1] is not None
        assert browsers[0].pool is not browsers[1].pool
        for e, browser in zip(envs, browsers, strict=True):
            device = host.env(e.env_id)._device
            assert device._run(device._page_eval("() => devicePixelRatio"), "dpr") == pytest.approx(
                browser.scale, rel=1e-6
            )
        running = browser_processes()
        assert len(running) >= 2
        second = host.env(envs[1].env_id).emulation
        envs[1].close()  # the last environment at its scale: its Chromium goes with it
        assert host.browser(second) is None
        assert len(browser_processes()) == len(running) - 1
        obs, _, _, _, info = envs[0].step(CLICK_LIST)
        assert info["aborted"] is False
    finally:
        for e in envs:
            e.close()


def browser_processes() -> list[int]:
    """This process's Chromium browser processes, from /proc (not from the host's own records)."""
    return [pid for pid, kind in chromium_processes(os.getpid()).items() if kind == "browser"]


def test_crashed_browser_aborts_episodes_and_is_replaced(host, packs):
    env = RealbenchEnv(packs["toy"], "buy-item", host=host)
    try:
        env.reset(seed=0)
        generation = host.generation
        assert host.kill_browser()
        _, reward, terminated, truncated, info = env.step(CLICK_LIST)
        assert info["aborted"] is True and info["outcome"] == "env_invalid"
        assert truncated and not terminated and reward == 0.0
        assert host.generation == generation + 1
        browser = host.browser(host.env(env.env_id).emulation)
        assert browser is not None and browser.pool.running
        with pytest.raises(EpisodeOver):  # never silently reset
            env.step(CLICK_LIST)
        obs, info = env.reset(seed=0)
        assert info["aborted"] is False and "商品列表" in obs["hierarchy"]
        _, _, _, _, info = env.step(CLICK_LIST)
        assert info["aborted"] is False
    finally:
        env.close()


def test_png_screenshots_and_drifted_clones(host, packs):
    env = RealbenchEnv(packs["toy"], "buy-item", host=host, image="png", drift="relabel")
    try:
        obs, _ = env.reset(seed=0)
        assert bytes(obs["screenshot"][:4]) == b"\x89PNG"
        assert "全部商品" in obs["hierarchy"] and "商品列表" not in obs["hierarchy"]  # the relabelled button
    finally:
        env.close()
    with pytest.raises(RealbenchError, match="drift"):
        RealbenchEnv(packs["toy"], "buy-item", host=host, drift="no-such-profile")


def test_a_window_nobody_sees_leaves_the_observations_as_they_were(packs):
    """RL pages live in a 16 px window (`WINDOW_SIZE_ARG`); they emulate their phone and are
    captured from their own surface, so every observation is the one a page in Chromium's default
    800x600 window gives."""
    seen = {}
    for window in ((), ("--window-size=800,600",)):  # Chromium takes the last size it is given
        h = EnvHost(browser_args=window).start()
        try:
            e = RealbenchEnv(packs["toy"], "buy-item", host=h, screen_cache=False, image="png")
            obs, _ = e.reset(seed=1)
            agent = GoldenAgent()
            agent.reset(h.env(e.env_id)._episode.instance)
            frames = [obs]
            for _ in range(2):  # the list, then an item's page (the plan's third tap buys)
                frames.append(e.step(golden_action(agent, _obs_of(e)))[0])
            device = h.env(e.env_id)._device
            assert device is not None and device._direct is not None  # a page opened over DevTools

            async def bounds(device=device) -> dict:
                return (await (await device._session_cdp()).send("Browser.getWindowForTarget"))["bounds"]

            found = device._run(bounds(), "window bounds")
            seen[window] = ((found["width"], found["height"]), frames)
            e.close()
        finally:
            h.close()
    small, default = seen[()], seen[("--window-size=800,600",)]
    assert small[0] == (16, 16) and default[0] == (800, 600)
    assert len({f["hierarchy"] for f in small[1]}) == 3  # three different screens
    for a, b in zip(small[1], default[1], strict=True):
        assert a["hierarchy"] == b["hierarchy"]
        assert bytes(a["screenshot"]) == bytes(b["screenshot"])


def _rl_command_lines(host: EnvHost, packs: dict[str, Any]) -> tuple[list[str], list[list[str]]]:
    """The command lines of the browser an RL page runs in and of its renderers, read from /proc."""
    e = RealbenchEnv(packs["toy"], "buy-item", host=host, screen_cache=False)
    try:
        e.reset(seed=0)
        browser = host.env(e.env_id)._browser
        assert browser is not None
        [(pid, argv)] = cdp.devtools_browsers(None, cdp.pool_mark(browser.pool)).items()
        renderers = [a for a in chromium_command_lines(pid).values() if process_type(a) == "renderer"]
        assert renderers
        return argv, renderers
    finally:
        e.close()


def test_rl_pages_javascript_runs_with_the_heaps_growth_bounded(host, packs):
    """V8's flags (`JS_FLAGS_ARG`: the heaps' growth between full collections bounded, size over
    speed) reach the renderer processes the pages run in, read from their own command lines: V8
    takes its flags from there, and a caller's later ``--js-flags`` would replace them."""
    assert JS_FLAGS_ARG.split("=", 1)[1].split() == ["--heap-growing-percent=100", "--optimize-for-size"]
    _, renderers = _rl_command_lines(host, packs)
    for argv in renderers:
        # Chromium rewrites its command line into one space-separated string: read it as text
        line = " ".join(argv)
        assert line.count("--js-flags=") == 1 and f" {JS_FLAGS_ARG} " in f"{line} ", argv


def test_rl_browsers_run_without_the_allocators_use_after_free_checks(host, packs):
    """`ALLOCATOR_CHECKS_OFF_ARG`'s features are off in the browser and its renderers (they take
    the browser's feature list on their command lines) beside Playwright's own: Chromium reads the
    last --disable-features only, Playwright puts its own first, the folded one comes last."""
    off = set(ALLOCATOR_CHECKS_OFF_ARG.split("=", 1)[1].split(","))
    assert len(off) == 3
    browser, renderers = _rl_command_lines(host, packs)
    for argv in [browser, *renderers]:
        disabled = [a for a in argv if a.startswith("--disable-features=")][-1]
        names = set(disabled.split("=", 1)[1].split(","))
        assert off <= names and "PaintHolding" in names, argv  # Playwright's list kept


def _browser_anonymous_mib(host: EnvHost) -> float:
    """The anonymous memory of `host`'s one browser process, from /proc/PID/smaps_rollup."""
    [browser] = host._browsers.values()
    [pid] = cdp.devtools_browsers(None, cdp.pool_mark(browser.pool))
    return rollup_mib([pid], "Anonymous")


def _steady_anonymous_mib(host: EnvHost) -> float:
    """The browser's anonymous memory once two readings 0.3 s apart agree within 0.5 MiB (frames
    the pages asked for may draw late on a loaded machine), at most 10 s."""
    last = _browser_anonymous_mib(host)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        time.sleep(0.3)
        now = _browser_anonymous_mib(host)
        if abs(now - last) < 0.5:
            return now
        last = now
    return last


def redrawn_frees(host: EnvHost, ids: list[int]) -> float:
    """MiB of the browser's anonymous memory that a redraw of every page frees."""
    before = _steady_anonymous_mib(host)
    for i in ids:
        device = host.env(i)._device
        assert device is not None
        device._run(device._page_eval("() => window.__rb.redrawBehind()"), "redraw")
    return before - _steady_anonymous_mib(host)


def test_a_capture_leaves_no_frames_behind_in_the_browser(packs, monkeypatch):
    """The display compositor keeps a capture's bitmaps (two frames) until it draws the page again,
    which in a 16 px window it seldom does: RL pages redraw a pixel behind their status bar after
    each capture. Read from the browser process's own memory."""
    n = 8
    frame_mib = 448 * 995 * 4 / 2**20
    h = EnvHost().start()
    try:
        config = EnvConfig(
            pack=packs["toy"], task_id="buy-item", image="png", short_side=448, screen_cache=False
        )
        ids = h.create([config] * n)
        with monkeypatch.context() as m:  # captures as a plain clone device takes them
            m.setattr(RLCloneDevice, "_capture", CloneDevice._capture)
            h.reset([ResetRequest(i, seed=1) for i in ids])
            h.step([StepRequest(i, CLICK_LIST) for i in ids])
        assert redrawn_frees(h, ids) >= n * frame_mib  # at least a frame per page (two seen)
        h.reset([ResetRequest(i, seed=2) for i in ids])
        h.step([StepRequest(i, CLICK_LIST) for i in ids])
        assert redrawn_frees(h, ids) < n * frame_mib / 2  # the pages' own captures kept nothing
    finally:
        h.close()


@pytest.mark.parametrize("pack", ["toy", "train_ticketing", "bank"])
def test_the_pixel_redrawn_after_each_capture_never_shows(host, packs, pack):
    """`redrawBehind` recolours a pixel behind the status bar black, then white: a reset's
    capture and two observations after it (one of each colour) are the same image."""
    path = packs["toy"] if pack == "toy" else str(Path(__file__).resolve().parents[1] / "taskpacks" / pack)
    [env_id] = host.create([EnvConfig(pack=path, image="png", short_side=448, screen_cache=False)])
    try:
        [reset] = host.reset([ResetRequest(env_id, seed=0)])
        device = host.env(env_id)._device
        assert device is not None
        images = [bytes(reset.observation.image), *(device.observe().screenshot.data for _ in range(2))]
        colours = device._run(device._page_eval(_BEHIND_COLOUR), "colour")
        # three captures, each followed by a redraw: black, white, black; so the images were
        # taken before the pixel existed, over black and over white
        assert colours == "rgb(0, 0, 0)"
        assert images[1] == images[0] and images[2] == images[0]
    finally:
        host.close_envs([env_id])


def test_train_ticketing_golden_plan_earns_reward_one_through_its_registered_id(host):
    from devices.rl.config import TASKPACKS
    from realbench.taskpack import load_pack

    if not (TASKPACKS / "train_ticketing" / "pack.yaml").exists():
        pytest.skip("the train_ticketing pack is not in this checkout")
    pack = load_pack(TASKPACKS / "train_ticketing")
    task = next((t for t in pack.tasks if t.real.boundary), pack.tasks[0])
    env = gym.make("realbench/train_ticketing-v1", task_id=task.id)
    try:
        total, info = _golden_episode(env.unwrapped, seed=0)
    finally:
        env.close()
    assert info["outcome"] == "success" and total == 1.0, info.get("verdict")


REGISTERED_IDS = sorted(i for i in gym.registry if i.startswith("realbench/"))


def test_every_pack_has_a_registered_id():
    from devices.rl import GENERIC_ENV, PACK_ENVS
    from devices.rl.config import TASKPACKS

    assert sorted(PACK_ENVS.values()) == sorted(p.parent.name for p in TASKPACKS.glob("*/pack.yaml"))
    assert set(REGISTERED_IDS) == {*PACK_ENVS, GENERIC_ENV}


@pytest.mark.parametrize("env_id", REGISTERED_IDS)
def test_every_registered_id_passes_check_env_and_a_golden_episode(host, env_id):
    """Conformance over everything registered: Gymnasium's checker, then one golden episode that
    earns the success reward (a commit-boundary task where the pack has one)."""
    from devices.rl import PACK_ENVS
    from devices.rl.config import TASKPACKS
    from realbench.taskpack import load_pack

    pack_name = PACK_ENVS.get(env_id, "toy")
    pack = load_pack(TASKPACKS / pack_name)
    task = next((t for t in pack.tasks if t.real.boundary), pack.tasks[0])
    kwargs = {} if env_id in PACK_ENVS else {"pack": str(TASKPACKS / pack_name)}
    env = gym.make(env_id, task_id=task.id, **kwargs)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            check_env(env.unwrapped, skip_render_check=True)
        total, info = _golden_episode(env.unwrapped, seed=0)
    finally:
        env.close()
    assert info["outcome"] == "success" and total == 1.0, info.get("verdict")


def test_a_boundary_tap_after_taps_on_nothing_is_still_caught(host, packs, monkeypatch):
    """The boundary check reuses the last parsed hierarchy while the screen's text is unchanged (a
    tap on nothing): the golden plan with such a tap before every step still ends at the boundary,
    and the reuse did happen (fewer parses than checks), so the cached path is what was tested."""
    import devices.rl.core as core

    parses = []

    class Counting(core.Hierarchy):
        def __init__(self, xml: str) -> None:
            parses.append(1)
            super().__init__(xml)

    monkeypatch.setattr(core, "Hierarchy", Counting)
    env = RealbenchEnv(packs["toy"], "buy-item", host=host)
    try:
        _, info = env.reset(seed=3)
        agent = GoldenAgent()
        agent.reset(env._host.env(env.env_id)._episode.instance)
        checks = 0
        for _ in range(info["max_steps"]):
            # the status bar's corner: no control there, the screen stays as it is
            _, _, terminated, truncated, info = env.step('{"type": "click", "x": 2, "y": 2}')
            assert not (terminated or truncated), info
            _, _, terminated, truncated, info = env.step(golden_action(agent, _obs_of(env)))
            checks += 2
            if terminated or truncated:
                break
    finally:
        env.close()
    assert info["end_reason"] == "boundary" and "购买" in info["boundary"]
    assert info["verdict"]["success"] is True
    assert 0 < len(parses) < checks
