"""One RL environment: a clone session shown in a headless page, with the shared episode loop's rules.

An episode ends like `realbench.episode.run_episode` ends one: an ``answer`` or ``terminate``
action, an action that crosses the task's commit boundary (delivered, as on every clone target),
too many consecutive unparseable actions, or the step budget (``max_steps``, a truncation). The
reward comes from the clone's verifier (see `RewardConfig`). A failure of the browser is never an
agent failure: the episode ends as an unscored abort (``info["aborted"]``, outcome ``env_invalid``).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel

from clones.base import Clone, State
from clones.server import Session, render_screen, working_copy
from devices.clone_browser import CALL_TIMEOUT_S, Emulation
from devices.clone_device import POSTED_KEYS, CloneDevice, action_seconds
from devices.rl import cdp, direct_page
from devices.rl.config import EnvConfig
from devices.rl.errors import EpisodeOver, SnapshotMismatch
from devices.rl.screen_cache import Lookup, ScreenCache
from devices.rl.transitions import EnvObservation, EnvSnapshot, Transition
from realbench.actions import (
    Action,
    Answer,
    Click,
    KeyPress,
    Terminate,
    Type,
    action_from_json,
    action_to_dict,
    parse_action,
)
from realbench.agents.images import ImageSize, target_size
from realbench.boundary import boundary_hit, reads_screen
from realbench.episode import decide_outcome
from realbench.episode_step import StepCounts, StepRules, decide_step
from realbench.errors import ActionError, ConfigError, DeviceError, DeviceLost, RealbenchError
from realbench.hierarchy import Hierarchy, Selector
from realbench.observation import ImageFormat, Observation
from realbench.outcome import EndReason, Outcome, Verdict
from realbench.taskpack import Task, TaskInstance, TaskPack

if TYPE_CHECKING:
    from devices.rl.host import EnvHost, HostBrowser
    from realbench.agents.formats import ActionFormat

log = logging.getLogger(__name__)

SEED_SPACE = 2**31
# how long a reset waits for another page's capture of its screen before taking its own
COALESCE_WAIT_S = 10.0
VERDICT_FIELDS = {"success", "progress", "side_effects", "reason", "name"}


def model_image_size(config: EnvConfig, width: int, height: int) -> ImageSize:
    """What `config.action_format`'s image policy resizes a width x height screenshot to."""
    from realbench.agents.formats import get_format

    assert config.action_format is not None
    policy = get_format(config.action_format).image_policy()
    if config.action_max_pixels is not None:
        policy = policy.model_copy(
            update={
                "max_pixels": config.action_max_pixels,
                "min_pixels": min(policy.min_pixels, config.action_max_pixels),
            }
        )
    return target_size(width, height, policy)


# The same decision the shared episode loop makes (clones always have a verdict).
outcome_for = decide_outcome


def parse_policy_action(action: Any) -> Action:
    """The action space's value (Action JSON text) or an already-parsed dict/Action."""
    if isinstance(action, bytes):
        action = action.decode("utf-8", errors="replace")
    if isinstance(action, str):
        return action_from_json(action)
    return parse_action(action)


# One evaluation swaps a reset's screen in, waits for the page to settle and dumps the hierarchy:
# one round trip to the page before the capture, and the dump's style and layout work is done
# before the capture asks for a frame instead of holding that frame back. (`CloneDevice` dumps
# beside its capture: there the capture re-renders the page for its scaled clip, and the dump
# overlaps that.) A capture needs no fresh damage: Chromium draws for the copy request itself
# (300 captures of idle pages, 40 in one browser: p50 15 ms, none over 35 ms). Invisible damage
# before every capture (a 1 px element whose colour flipped, and four more flips 10-100 ms later)
# was needed with an older Chromium, where 1 capture in 20 waited ~1 s; it drew a frame per flip,
# 2-5 ms of Chromium's CPU per step (docs/benchmarks.md, RL environments).
_SHOW_SETTLE_DUMP_JS = """([screen, scale, dump]) => {
  if (screen) window.__rb.apply(screen, true);
  return window.__rb.settledDump(scale, dump);
}"""
# A step's action and that settle and dump in one evaluation (`RLCloneDevice.act_and_observe`).
_AFTER_TAP_DUMP_JS = "([n, scale]) => window.__rb.afterTapDump(n, scale)"
_POST_DUMP_JS = "([event, scale]) => window.__rb.postDump(event, scale)"


@dataclass(frozen=True)
class _Shown:
    """A page's last observation, taken while the page was still, and the server's screen version
    it showed. A step's page shows the same pixels if it shows the same version and hierarchy and
    is still: the clones' pixels follow from the DOM, which only the server's screens change
    (runtime.js `apply`), beside form fields (in the hierarchy) and what makes a page not still."""

    version: Any
    image: bytes
    hierarchy: str

    def shows(self, result: dict[str, Any], hierarchy: str) -> bool:
        return (
            bool(result.get("still"))
            and result["settled"]["version"] == self.version
            and hierarchy == self.hierarchy
        )


class RLCloneDevice(CloneDevice):
    """The clone device over a direct DevTools session, observing with one evaluation before the
    capture; with a `screen_cache`, the observation of a still screen that a reset or restore swaps
    in is taken once per host (see `ScreenCache`)."""

    # Every episode starts with a reset or restore that swaps its screen in, so a page opens without
    # one: the renderer and the compositor do not lay out and draw a screen nobody captures.
    page_query = "?screen=none"

    def __init__(self, *args: Any, screen_cache: ScreenCache | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.screen_cache = screen_cache
        # the page's direct DevTools session (`devices.rl.cdp`), attached on first use; None inside
        # the future: this page stays on Playwright's path
        self._direct: asyncio.Future[cdp.PageSession | None] | None = None
        self._shown: _Shown | None = None  # the last observation, while the page was still
        self._unchanged = 0  # steps that found the page as `_shown` left it
        self._unchanged_differs = False  # a capture of such a step differed: always capture

    def close(self) -> None:
        self._direct = None
        self._shown = None
        super().close()

    async def _open(self, session: str) -> None:
        """A new page is opened over the direct connection where there is one (`direct_page`); a
        Playwright page (the direct path off, or headers to send) is attached to on first use."""
        self._shown = None
        if self._page is None:
            url = f"{self.server_url}/s/{session}{self.page_query}"
            page = await direct_page.open_page(self.pool, self.emulation, url, headers=bool(self._headers))
            if page is not None:
                self._context, self._page, self._owns_context = None, page, False
                self._generation = self.pool.generation
                page.on("crash", self._on_crash)
                self._direct = asyncio.get_running_loop().create_future()
                self._direct.set_result(page.session)
                self._session = session
                self._touch_ends = 0
                return
        elif isinstance(self._page, direct_page.DirectPage) and session != self._session:
            raise DeviceError(f"{self.serial}: an RL page shows one session", hint="open a new device")
        await super()._open(session)
        self._direct = None  # a new page or a navigation: attach afresh

    async def _direct_session(self) -> cdp.PageSession | None:
        if self._direct is None:
            # a future, so that calls racing for the first session share one attachment
            self._direct = asyncio.ensure_future(cdp.page_session(self.pool, self._require_page().url))
        direct = self._direct
        try:
            return await asyncio.shield(direct)
        except BaseException:
            if self._direct is direct and direct.done() and (direct.cancelled() or direct.exception()):
                self._direct = None
            raise

    async def _session_cdp(self) -> Any:
        """Captures and input events go over the direct session where there is one."""
        return await self._direct_session() or await super()._session_cdp()

    async def _page_eval(self, script: str, arg: Any = None) -> Any:
        direct = await self._direct_session()
        if direct is None:
            return await super()._page_eval(script, arg)
        self._require_page()
        return await direct.evaluate(script, arg)

    async def _capture(self) -> bytes:
        image = await super()._capture()
        # the display compositor frees the capture's bitmaps (3.5 MiB at 448x995) when it next
        # draws the page, not before (runtime.js, redrawBehind; docs/benchmarks.md)
        await self._page_eval("() => window.__rb.redrawBehind()")
        return image

    def observe(self) -> Observation:
        return self._observation(self._run(self._observe_screen(None), "observe"))

    def act_and_observe(self, action: Action) -> Observation:
        """`act`, then `observe`. A tap, a key the page posts or typed text asks for the
        observation's settle and dump in the action's own last evaluation (runtime.js,
        `afterTapDump`, `postDump`): one evaluation and one call into the browser's loop fewer per
        step, two for a key, and the page does the same in the same order."""
        timeout = 2 * CALL_TIMEOUT_S + action_seconds(action)
        return self._observation(self._run(self._act_observe(action), f"act {action.type}", timeout))

    async def _act_observe(self, action: Action) -> tuple[bytes, str]:
        scale = self.emulation.scale
        if isinstance(action, Click):
            result = await self._tap_applied(*self._css(action.x, action.y), _AFTER_TAP_DUMP_JS, scale)
        elif isinstance(action, KeyPress) and action.key in POSTED_KEYS:
            result = await self._page_eval(_POST_DUMP_JS, [POSTED_KEYS[action.key], scale])
        elif isinstance(action, Type):
            await self._require_page_cdp("Input.insertText", {"text": action.text})
            result = await self._page_eval(_POST_DUMP_JS, ["__sync__", scale])
        else:
            if not isinstance(action, Answer | Terminate):
                await self._act(action)
            return await self._observe_screen(None)
        return await self._observe_after(result)

    async def _observe_after(self, result: dict[str, Any]) -> tuple[bytes, str]:
        """The observation after a step's evaluation settled the page and dumped it (`result`). A
        step that left a still page as it was keeps the page's last observation (the screen cache's
        rule: the first such step and every `verify_every`-th capture again and compare)."""
        self._check_settled(result["settled"])
        self._require_page()
        hierarchy = str(result["hierarchy"])
        shown, cache = self._shown, self.screen_cache
        if cache is None or shown is None or self._unchanged_differs or not shown.shows(result, hierarchy):
            return self._keep(result, await self._capture(), hierarchy)
        self._unchanged += 1
        if self._unchanged != 1 and self._unchanged % cache.verify_every:
            cache.unchanged_served()
            return shown.image, hierarchy
        image = await self._capture()
        cache.unchanged_checked(image == shown.image)
        if image != shown.image:
            self._unchanged_differs = True
            log.warning(
                "%s: a step that left the page as it was gave another image (%d and %d bytes); "
                "this page's steps are all captured from now on",
                self.serial,
                len(shown.image),
                len(image),
            )
        return self._keep(result, image, hierarchy)

    def _keep(self, result: dict[str, Any], image: bytes, hierarchy: str) -> tuple[bytes, str]:
        """`image` and `hierarchy` as the page's last observation (kept only while it is still)."""
        self._shown = _Shown(result["settled"]["version"], image, hierarchy) if result.get("still") else None
        return image, hierarchy

    def collect_garbage(self) -> None:
        """A full collection of the heaps of this page's renderer (all its pages share them)."""

        async def collect() -> None:
            await (await self._session_cdp()).send("HeapProfiler.collectGarbage", {})

        self._require_page()
        self._run(collect(), "collect garbage")

    def show_and_observe(self, screen: dict[str, Any]) -> Observation:
        """`show` a screen payload, then `observe` it."""
        return self._observation(self._run(self._observe_screen(screen), "show and observe"))

    async def _observe_screen(self, screen: dict[str, Any] | None) -> tuple[bytes, str]:
        cache = self.screen_cache if screen is not None else None
        found = None
        if cache is not None and screen is not None:
            found = cache.lookup(ScreenCache.key(self.clone.name, screen, self._look()))
        self._shown = None
        try:
            result, image, hierarchy = await self._observe_through(cache, found, screen)
            return self._keep(result, image, hierarchy)
        finally:
            if cache is not None and found is not None and found.lead:
                cache.give_up(found.key)  # a no-op once stored; else the waiters capture themselves

    async def _observe_through(
        self, cache: ScreenCache | None, found: Lookup | None, screen: dict[str, Any] | None
    ) -> tuple[dict[str, Any], bytes, str]:
        # an observation about to be served (or another page's capture and dump of it) needs no
        # dump here, unless the cache has nothing to serve after all
        serve = found is not None and (found.image is not None or found.pending is not None)
        result = await self._page_eval(_SHOW_SETTLE_DUMP_JS, [screen, self.emulation.scale, not serve])
        self._check_settled(result["settled"])
        self._require_page()
        hierarchy = None if result["hierarchy"] is None else str(result["hierarchy"])
        if cache is None or found is None:
            assert hierarchy is not None
            return result, await self._capture(), hierarchy
        if not result["still"]:
            cache.not_still()
            if found.lead:  # nothing to share: the waiters need not wait for this capture
                cache.give_up(found.key)
            if hierarchy is None:
                hierarchy = await self._dump()
            return result, await self._capture(), hierarchy
        if found.pending is not None:
            found = await self._wait_for_capture(cache, found)
        if found.image is not None:
            assert found.hierarchy is not None
            cache.served()
            return result, found.image, found.hierarchy
        if hierarchy is None:  # served nothing after all (a lookup again after a wait)
            hierarchy = await self._dump()
        image = await self._capture()
        cache.store(found.key, image, hierarchy)
        return result, image, hierarchy

    @staticmethod
    async def _wait_for_capture(cache: ScreenCache, found: Lookup) -> Lookup:
        """The lookup again once another page's capture of the same screen is done (or given up)."""
        assert found.pending is not None
        try:
            # shielded: a timeout here must not cancel what the other waiters wait on
            await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(found.pending)), COALESCE_WAIT_S)
        except TimeoutError:
            log.debug("another page's capture of a screen took over %.0f s; capturing here", COALESCE_WAIT_S)
            return Lookup(found.key)
        return cache.lookup(found.key, coalesce=False)

    def _look(self) -> dict[str, Any]:
        return {
            "emulation": self.emulation.model_dump(mode="json"),
            "format": self.image_format.value,
            "quality": self.jpeg_quality,
        }


@dataclass(kw_only=True)
class _Episode(StepCounts):
    instance: TaskInstance
    before: State
    boundary: list[Selector]
    progress: float = 0.0
    episode_return: float = 0.0
    answer: str | None = None
    done: bool = False


class EnvCore:
    """One environment inside an `EnvHost`. Thread-safe; one operation at a time per environment."""

    def __init__(self, host: EnvHost, env_id: int, config: EnvConfig, pack: TaskPack, clone: Clone) -> None:
        self.host = host
        self.env_id = env_id
        self.config = config
        self.pack = pack
        self.clone = clone
        self.emulation = Emulation.for_short_side(config.short_side)
        self.lock = threading.Lock()
        self.rng = np.random.default_rng()
        self.closed = False
        self._device: RLCloneDevice | None = None
        self._session: Session | None = None
        self._browser: HostBrowser | None = None  # the host's browser the page lives in
        self._generation = -1
        self._episode: _Episode | None = None
        self._last: EnvObservation | None = None
        self._parsed: tuple[str, Hierarchy] | None = None  # the last hierarchy parsed, with its text

    # --- lifecycle ---

    def open(self) -> None:
        """Create the clone session and its page (bring-up); the first reset shows a screen."""
        with self.lock:
            self._ensure_page()

    def close(self) -> None:
        with self.lock:
            self.closed = True
            device, self._device = self._device, None
            session, self._session = self._session, None
            browser, self._browser = self._browser, None
            if device is not None:
                device.close()
            if session is not None:
                self.host.drop_session(session.id)
            if browser is not None:
                self.host.release_browser(browser)

    @property
    def stale(self) -> bool:
        """The page belongs to a browser that has since been replaced."""
        return self._device is not None and (
            self._browser is None or self._generation != self._browser.generation
        )

    @property
    def page_browser(self) -> HostBrowser | None:
        """The host's browser this environment's live page is in (None: no page, or closed)."""
        browser = self._browser
        return browser if self._device is not None and not self.closed else None

    def collect_garbage(self) -> None:
        """A full collection of the heaps of this environment's renderer (its pages share them)."""
        device = self._device
        if device is None:
            raise DeviceError(f"environment {self.env_id} has no page any more")
        device.collect_garbage()

    # --- the RL API ---

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> Transition:
        options = dict(options or {})
        with self.lock:
            if seed is not None:
                self.rng = np.random.default_rng(seed)
            task = self._pick_task(options.pop("task_id", None))
            instance_seed = options.pop("instance_seed", None)
            if instance_seed is None:
                instance_seed = seed if seed is not None else int(self.rng.integers(SEED_SPACE))
            if options:
                raise ConfigError(
                    f"unknown reset options {sorted(options)}", hint="reset options: task_id, instance_seed"
                )
            instance = task.instantiate(int(instance_seed), task.clone.setup.clock.date())
            start = self.host.start_state(self.clone, task, instance)
            self._start(start, instance, before=start)
            episode = self._episode
            assert episode is not None
            if self.config.reward.shaped:
                episode.progress = self._verdict(None).progress
            return Transition(observation=self._require_last(), info=self._info())

    def step(self, action: Any) -> Transition:
        with self.lock:
            episode = self._episode
            if episode is None or episode.done:
                raise EpisodeOver(
                    f"environment {self.env_id} has no episode in progress",
                    hint="call reset() before step(), and again after terminated or truncated",
                )
            if self.stale:
                return self._abort(episode, "the browser was replaced after a crash")
            try:
                return self._step(episode, action)
            except DeviceError as exc:
                self._device_failed(exc)
                return self._abort(episode, f"{type(exc).__name__}: {exc.message}")

    def snapshot(self) -> EnvSnapshot:
        with self.lock:
            episode = self._episode
            if episode is None or self._session is None or episode.done:
                raise EpisodeOver(
                    f"environment {self.env_id} has no episode in progress to snapshot",
                    hint="snapshot after reset() and before the episode ends",
                )
            with self._session.lock:
                state = working_copy(self._session.state)
            instance = episode.instance
            return EnvSnapshot(
                clone=self.clone.name,
                pack=self.pack.app,
                task_id=instance.task.id,
                seed=instance.seed,
                params=dict(instance.params),
                instruction=instance.instruction,
                state=state,
                before=episode.before,
                steps=episode.steps,
                format_errors=episode.format_errors,
                consecutive_format_errors=episode.consecutive_format_errors,
                progress=episode.progress,
                episode_return=episode.episode_return,
            )

    def restore(self, snap: EnvSnapshot) -> Transition:
        if not isinstance(snap, EnvSnapshot):
            raise SnapshotMismatch(
                f"cannot restore a {type(snap).__name__} into environment {self.env_id}",
                hint="pass a snapshot taken with snapshot()",
            )
        if snap.clone != self.clone.name or snap.pack != self.pack.app:
            raise SnapshotMismatch(
                f"snapshot of clone {snap.clone!r} (pack {snap.pack!r}) cannot be restored into environment "
                f"{self.env_id}, which runs clone {self.clone.name!r} (pack {self.pack.app!r})",
                hint="restore a snapshot into an environment of the same clone and task pack",
            )
        with self.lock:
            task = self.pack.task(snap.task_id)
            instance = TaskInstance(
                task=task, seed=snap.seed, params=dict(snap.params), instruction=snap.instruction
            )
            self._start(working_copy(snap.state), instance, before=snap.before)
            episode = self._episode
            assert episode is not None
            episode.steps = snap.steps
            episode.format_errors = snap.format_errors
            episode.consecutive_format_errors = snap.consecutive_format_errors
            episode.progress = snap.progress
            episode.episode_return = snap.episode_return
            return Transition(observation=self._require_last(), info=self._info())

    def verdict(self) -> Verdict:
        """The verifier's verdict on the current state and the episode's answer (if it gave one):
        what the terminal reward is computed from, without ending anything."""
        with self.lock:
            if self._episode is None:
                raise EpisodeOver(f"environment {self.env_id} has no episode", hint="call reset() first")
            return self._verdict(self._episode.answer)

    # --- internals ---

    def _pick_task(self, task_id: str | None) -> Task:
        wanted = task_id or self.config.task_id
        if wanted:
            return self.pack.task(wanted)
        tasks = self.pack.tasks
        return tasks[0] if len(tasks) == 1 else tasks[int(self.rng.integers(len(tasks)))]

    def _home_state(self) -> State:
        task = self.pack.task(self.config.task_id) if self.config.task_id else self.pack.tasks[0]
        return self.host.start_state(self.clone, task, task.instantiate(0, task.clone.setup.clock.date()))

    def _ensure_page(self) -> None:
        """A live page of a session of this clone (new ones after a crash or on first use), its
        session at the first task's start state and its screen empty until a reset or restore."""
        if self._device is not None and not self.stale and self._session is not None:
            return
        if self._device is not None:
            self._device.close()
        if self._session is not None:
            self.host.drop_session(self._session.id)
        self._device = self._session = None
        if self._browser is None:  # held from the first page until close()
            self._browser = self.host.acquire_browser(self.emulation)
        browser = self._browser
        generation = browser.generation
        self._session = self.host.new_session(self.clone, self._home_state(), self.config.drift)
        device = RLCloneDevice(
            browser.pool,
            self.host.server_url,
            self.clone,
            emulation=self.emulation,
            image_format=ImageFormat(self.config.image.wire_format),
            jpeg_quality=self.config.jpeg_quality,
            serial=f"rl-{self.clone.name}-{self.env_id}",
            screen_cache=self.host.screen_cache if self.config.screen_cache else None,
        )
        try:
            with self.host.opening_page(browser):
                device.open(self._session.id)
        except DeviceError as exc:
            self.host.device_failed(browser, generation, exc)
            device.close()
            raise
        self._device, self._generation = device, generation

    def _start(self, state: State, instance: TaskInstance, *, before: State) -> None:
        """Put the session in `state` and the page on its screen, then observe (retried once on a
        fresh page if the browser died: a reset starts a new episode, so nothing is lost)."""
        for attempt in range(2):
            try:
                self._ensure_page()
                session, device = self._session, self._device
                assert session is not None and device is not None
                with session.lock:
                    session.reset_to(working_copy(state))
                    screen = {
                        "version": session.version,
                        "route": session.state["ui"]["route"],
                        "html": render_screen(session),
                    }
                self._last = self._observation_of(device.show_and_observe(screen))
                break
            except DeviceError as exc:
                self._device_failed(exc)
                if attempt or not isinstance(exc, DeviceLost):
                    raise
                log.warning(
                    "environment %d: page lost during reset (%s); retrying on a new page", self.env_id, exc
                )
                self._drop_page()
        self._episode = _Episode(instance=instance, before=before, boundary=instance.boundary())

    def _device_failed(self, exc: DeviceError) -> None:
        """A failure of the page this environment holds (its browser may be the one to replace)."""
        if self._browser is not None:
            self.host.device_failed(self._browser, self._generation, exc)

    def _drop_page(self) -> None:
        device, self._device = self._device, None
        if device is not None:
            device.close()

    @staticmethod
    def _observation_of(obs: Observation) -> EnvObservation:
        shot = obs.screenshot
        return EnvObservation(
            image=shot.data, format=shot.format, width=shot.width, height=shot.height, hierarchy=obs.hierarchy
        )

    def _require_last(self) -> EnvObservation:
        if self._last is None:
            raise EpisodeOver(f"environment {self.env_id} has not observed anything yet", hint="call reset()")
        return self._last

    def _step(self, episode: _Episode, raw: Any) -> Transition:
        if not isinstance(raw, str | bytes | dict | BaseModel):
            raise ActionError(
                f"an action is Action JSON text (or its object), not {type(raw).__name__}",
                hint='e.g. \'{"type": "click", "x": 500, "y": 120}\'',
            )
        if self.config.strict_actions:
            self._parse(raw)  # raises ActionError before anything is counted
        info: dict[str, Any] = {"format_error": None, "boundary": None, "action": None}
        reward = 0.0
        action: Action | None
        try:
            action, *then = self._parse(raw)
        except ActionError as exc:
            action = None
            info["format_error"] = exc.message
            reward -= self.config.reward.format_error_penalty
        else:
            info["action"] = action_to_dict(action)
        rule = decide_step(
            episode,
            StepRules(max_steps=self._max_steps(episode), max_format_errors=self.config.max_format_errors),
            action,
            hierarchy=self._hierarchy(episode) if action is not None and reads_screen(action) else None,
            boundary=episode.boundary,
            screen=self._screen(),
            delivers_boundary=True,  # a clone delivers a boundary tap: crossing it is harmless here
        )
        end, answer = rule.end, rule.answer
        if answer is not None:
            episode.answer = answer
        if rule.send and action is not None:
            self._act(action)
        if rule.boundary is not None:
            info["boundary"] = rule.boundary
        elif rule.send and then:
            # The format's follow-up (e.g. UI-TARS's Enter after typing) belongs to the same step and
            # meets the same boundary rule, each against the screen it lands on.
            info["then"] = [action_to_dict(a) for a in then]
            for follow in then:
                hit = boundary_hit(follow, self._hierarchy(episode), episode.boundary, self._screen())
                self._act(follow)
                if hit is not None:
                    info["boundary"] = hit.describe()
                    end = EndReason.BOUNDARY
                    break
        truncated = end is EndReason.STEP_BUDGET
        shaped = self.config.reward.shaped
        verdict = self._verdict(answer) if end is not None or shaped else None
        if shaped and verdict is not None:
            reward += verdict.progress - episode.progress
            episode.progress = verdict.progress
        if end is not None:
            assert verdict is not None
            reward += self._terminal_reward(verdict)
            episode.done = True
            info.update(self._end_info(end, verdict, answer))
        episode.episode_return += reward
        info.update(self._info())
        return Transition(
            observation=self._require_last(),
            reward=reward,
            terminated=end is not None and not truncated,
            truncated=truncated,
            info=info,
        )

    def _parse(self, raw: Any) -> list[Action]:
        """The step's actions: Action JSON, or raw model text in `config.action_format` (which
        may ask for a follow-up, e.g. UI-TARS's type-then-Enter)."""
        if self.config.action_format is None or not isinstance(raw, str | bytes):
            return [parse_policy_action(raw)]
        text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
        parsed = self.action_reader().parse(text, self.model_image_size())
        if parsed.action is None:
            raise ActionError(parsed.error or "unparseable model output")
        return [parsed.action, *parsed.then]

    def action_reader(self) -> ActionFormat:
        from realbench.agents.formats import get_format

        assert self.config.action_format is not None
        return get_format(self.config.action_format)

    def model_image_size(self) -> ImageSize:
        """The size the model was shown the current screenshot at (the format's image policy)."""
        last = self._require_last()
        return model_image_size(self.config, last.width, last.height)

    def _act(self, action: Action) -> None:
        assert self._device is not None
        self._last = self._observation_of(self._device.act_and_observe(action))

    def _hierarchy(self, episode: _Episode) -> Hierarchy | None:
        """The last observation's hierarchy, for the boundary rule (None where it has nothing to check)."""
        last = self._last
        if not episode.boundary or last is None or not last.hierarchy:
            return None
        parsed = self._parsed
        # a tap on nothing leaves the same screen: its hierarchy is parsed once (equal text, the
        # same tree; the boundary check only reads it)
        if parsed is not None and parsed[0] == last.hierarchy:
            return parsed[1]
        try:
            self._parsed = (last.hierarchy, Hierarchy(last.hierarchy))
            return self._parsed[1]
        except RealbenchError:
            log.warning("environment %d: unparseable hierarchy; boundary check skipped", self.env_id)
            return None

    def _screen(self) -> tuple[int, int]:
        last = self._last
        return (last.width, last.height) if last is not None else (0, 0)

    def _max_steps(self, episode: _Episode) -> int:
        return self.config.max_steps or episode.instance.task.max_steps

    def _verdict(self, answer: str | None) -> Verdict:
        episode = self._episode
        assert episode is not None and self._session is not None
        with self._session.lock:
            return self.clone.verify_instance(episode.instance, episode.before, self._session.state, answer)

    def _terminal_reward(self, verdict: Verdict) -> float:
        cfg = self.config.reward
        reward = cfg.success_reward if verdict.success and not verdict.side_effects else 0.0
        if verdict.side_effects:
            reward -= cfg.side_effect_penalty
        return reward

    def _end_info(self, end: EndReason, verdict: Verdict, answer: str | None) -> dict[str, Any]:
        outcome = outcome_for(end, verdict)
        return {
            "end_reason": end.value,
            "outcome": outcome.value,
            "success": outcome is Outcome.SUCCESS,
            "answer": answer,
            "verdict": verdict.model_dump(mode="json", include=VERDICT_FIELDS),
        }

    def _abort(self, episode: _Episode, why: str) -> Transition:
        episode.done = True
        self._drop_page()
        info = {
            **self._info(),
            "aborted": True,
            "error": why,
            "end_reason": EndReason.ABORT.value,
            "outcome": Outcome.ENV_INVALID.value,
            "success": False,
        }
        log.warning("environment %d: episode aborted (%s)", self.env_id, why)
        last = self._last
        if last is None:
            raise DeviceLost(f"environment {self.env_id}: {why}")
        return Transition(observation=last, reward=0.0, terminated=False, truncated=True, info=info)

    def _info(self) -> dict[str, Any]:
        episode = self._episode
        if episode is None:
            return {"env_id": self.env_id}
        instance = episode.instance
        extra: dict[str, Any] = {}
        if self.config.action_format is not None and self._last is not None:
            size = self.model_image_size()
            extra = {"action_format": self.config.action_format, "image_size": [size.width, size.height]}
        return {
            **extra,
            "env_id": self.env_id,
            "task_id": instance.task.id,
            "seed": instance.seed,
            "instruction": instance.instruction,
            "step": episode.steps,
            "max_steps": self._max_steps(episode),
            "episode_return": episode.episode_return,
            "aborted": False,
        }
