"""Heap collections on a clock (`devices/rl/heap_collection.py`): when they are due, how they are
configured, and (browser) that a step that finds one due empties the renderer's heap of garbage,
read from V8's own heap figures."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from devices.rl.config import EnvConfig
from devices.rl.heap_collection import ENV_VAR, HeapCollections, configured_every_s
from devices.rl.host import JS_FLAGS_ARG, EnvHost, ResetRequest, StepRequest
from realbench.errors import ConfigError
from tests.rl_support import write_pack

BACK = '{"type": "key", "key": "back"}'
# about 20 MB of objects the page lets go of at once: old enough to outlive V8's young generation
GARBAGE_JS = """() => {
  let junk = [];
  for (let i = 0; i < 300000; i++) junk.push({ i: i, s: "garbage-" + i, a: [i, i + 1] });
  window.__rbJunk = junk;
  window.__rbJunk = null;
  return junk.length;
}"""
# V8 starts a collection of its own when the old generation crosses its limit, and the garbage above
# crosses it: about one run in eight, the collection began just after the page let go of the garbage
# and took it during the step, with no collection on the clock. An old generation this large keeps
# V8's own collections out of the comparison in both runs (0 of 16 under two busy cores, against
# 3 of 24 without it).
NO_OWN_COLLECTIONS = (f"{JS_FLAGS_ARG} --initial-old-space-size=256",)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_collection_is_due_once_per_interval_and_the_first_call_starts_the_clock() -> None:
    clock = Clock()
    c = HeapCollections(every_s=3.0, clock=clock)
    assert not c.due()  # pages just up
    clock.now += 2.9
    assert not c.due()
    clock.now += 0.2
    assert c.due() and not c.due()
    clock.now += 3.0
    assert c.due()


def test_threads_stepping_at_once_get_one_collection() -> None:
    clock = Clock()
    c = HeapCollections(every_s=3.0, clock=clock)
    c.due()
    clock.now += 5
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: c.due(), range(64)))
    assert answers.count(True) == 1


def test_no_interval_means_no_collections() -> None:
    clock = Clock()
    c = HeapCollections(every_s=None, clock=clock)
    for _ in range(3):
        clock.now += 100
        assert not c.due()


def test_pages_take_their_turns() -> None:
    c = HeapCollections()
    assert [c.next_turn(3) for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]


@pytest.mark.parametrize(("raw", "expected"), [(None, 1.5), ("off", None), ("0", None), ("2.5", 2.5)])
def test_the_interval_comes_from_the_environment(monkeypatch, raw, expected) -> None:
    if raw is None:
        monkeypatch.delenv(ENV_VAR, raising=False)
    else:
        monkeypatch.setenv(ENV_VAR, raw)
    assert configured_every_s() == expected


@pytest.mark.parametrize("raw", ["soon", "-2", "nan"])
def test_a_bad_interval_is_refused(monkeypatch, raw) -> None:
    monkeypatch.setenv(ENV_VAR, raw)
    with pytest.raises(ConfigError):
        configured_every_s()


def _js_heap_used_mb(host: EnvHost, env_id: int) -> float:
    device = host.env(env_id)._device
    assert device is not None

    async def usage() -> float:
        used = await (await device._session_cdp()).send("Runtime.getHeapUsage", {})
        return float(used["usedSize"]) / 1e6

    return device._run(usage(), "heap usage")


def _garbage_left_after_a_step(tmp_path, every_s: float | None) -> tuple[float, float, dict]:
    host = EnvHost(collect_every_s=every_s, browser_args=NO_OWN_COLLECTIONS).start()
    try:
        config = EnvConfig(pack=str(write_pack(tmp_path / "pack")), task_id="buy-item", screen_cache=False)
        [env_id] = host.create([config])
        host.reset([ResetRequest(env_id, seed=0)])
        host.step([StepRequest(env_id, BACK)])  # starts the clock
        device = host.env(env_id)._device
        assert device is not None
        assert device._run(device._page_eval(GARBAGE_JS), "garbage") == 300000
        before = _js_heap_used_mb(host, env_id)
        host.step([StepRequest(env_id, BACK)])
        return before, _js_heap_used_mb(host, env_id), host.stats()["heap_collections"]
    finally:
        host.close()


@pytest.mark.browser
def test_a_step_that_finds_a_collection_due_collects_the_renderers_garbage(tmp_path) -> None:
    before, after, stats = _garbage_left_after_a_step(tmp_path / "on", every_s=1e-6)
    assert stats["collections"] >= 1 and stats["failures"] == 0
    assert before - after > 20, (before, after)  # V8's own figures: the garbage is gone
    # the same steps without collections on a clock leave it where it was
    before_off, after_off, stats_off = _garbage_left_after_a_step(tmp_path / "off", every_s=None)
    assert stats_off["collections"] == 0
    assert before_off - after_off < 10, (before_off, after_off)
