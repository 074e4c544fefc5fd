"""The clone's screen for a fidelity label, rendered by headless Chromium at a capture's resolution.

A label (see `analysis.fidelity.captures`) names a route and the state behind it: the clone's
default setup (optionally a `scenario`), or a task's clone setup after the first `steps` steps of its
golden plan (run browser-free by `clones.dom_plan`). The state goes into a clone-server session,
which a page emulating the capture's screen shows; its screenshot and hierarchy are what the
capture is scored against.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Protocol

from clones.base import Clone, State, get_clone, replace_route
from clones.dom_plan import initial_state, instantiate, plan_runner
from clones.server import CloneServer
from devices.clone_browser import BrowserPool, Emulation
from devices.clone_device import CloneDevice
from realbench.errors import ConfigError
from realbench.observation import ImageFormat
from realbench.taskpack import CloneSetup, TaskPack

CSS_WIDTH = 412


class LabelLike(Protocol):
    """What a fidelity label says (structurally: `analysis.fidelity.captures.ScreenLabel`)."""

    @property
    def route(self) -> str: ...

    @property
    def task(self) -> str | None: ...

    @property
    def steps(self) -> int: ...

    @property
    def seed(self) -> int: ...

    @property
    def scenario(self) -> str | None: ...


@dataclass(frozen=True)
class CloneScreenshot:
    screenshot: bytes
    hierarchy: str
    route: str


def emulation_for(width: int, height: int) -> Emulation:
    """A CSS viewport near the clones' 412 px width whose pixel size is exactly width × height."""
    for delta in range(0, 40):
        for css_w in (CSS_WIDTH + delta, CSS_WIDTH - delta):
            if (css_w * height) % width == 0:
                return Emulation(width=css_w, height=css_w * height // width, scale=width / css_w)
    return Emulation(width=CSS_WIDTH, height=round(height * CSS_WIDTH / width), scale=width / CSS_WIDTH)


def label_state(clone: Clone, pack: TaskPack, label: LabelLike) -> State:
    """The clone state the label names; the route it ends on must be the label's."""
    if label.task is not None:
        instance = instantiate(pack.task(label.task), label.seed)
        runner = plan_runner(clone, initial_state(clone, instance), instance)
        plan = instance.task.golden
        if label.steps > len(plan):
            raise ConfigError(f"label asks for {label.steps} steps, task {label.task} has {len(plan)}")
        for step in plan[: label.steps]:
            runner.step(step)
        state = copy.deepcopy(runner.state)
        if state["ui"]["route"] != label.route:
            raise ConfigError(
                f"task {label.task} after {label.steps} steps shows {state['ui']['route']!r}, "
                f"not {label.route!r}",
                hint="fix the capture's label (the route or the step count)",
            )
        return state
    data: dict[str, Any] = {"scenario": label.scenario} if label.scenario else {}
    state = clone.build_state(CloneSetup(data=data), {})
    if label.route not in clone.routes():
        raise ConfigError(f"clone {clone.name} has no route {label.route!r}")
    if state["ui"]["route"] != label.route:
        replace_route(state, label.route)
    return state


class CloneScreenRenderer:
    """Renders labels of one pack's clone; starts a clone server and Chromium for its lifetime."""

    def __init__(self, pack: TaskPack) -> None:
        self.pack = pack
        self.clone = get_clone(pack.clone)
        self._server: CloneServer | None = None
        self._pool: BrowserPool | None = None

    def __enter__(self) -> CloneScreenRenderer:
        self._server = CloneServer().start()
        try:
            self._pool = BrowserPool().start()
        except BaseException:
            self._server.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.close()
        if self._server is not None:
            self._server.stop()

    def render(self, label: LabelLike, width: int, height: int) -> CloneScreenshot:
        import httpx

        if self._server is None or self._pool is None:
            raise ConfigError("the renderer is not started", hint="use it as a context manager")
        state = label_state(self.clone, self.pack, label)
        resp = httpx.post(
            f"{self._server.url}/api/sessions", json={"clone": self.clone.name, "state": state}, timeout=30
        )
        resp.raise_for_status()
        session = str(resp.json()["session"])
        device = CloneDevice(
            self._pool,
            self._server.url,
            self.clone,
            emulation=emulation_for(width, height),
            image_format=ImageFormat.PNG,
        )
        try:
            device.open(session)
            obs = device.observe()
        finally:
            device.close()
            httpx.delete(f"{self._server.url}/api/sessions/{session}", timeout=30)
        return CloneScreenshot(obs.screenshot.data, obs.hierarchy or "", str(state["ui"]["route"]))
