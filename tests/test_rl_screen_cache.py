"""The screen cache: a still screen's image and hierarchy are taken once per host and reused by
resets and restores, checked against new captures and dumps, never used for a screen that changes by
itself; a step that leaves a still page as it was keeps the page's last observation, under the same
checks. Evidence is the page's own capture and dump, taken beside the cache."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from devices.rl.config import EnvConfig
from devices.rl.gym_env import RealbenchEnv
from devices.rl.host import EnvHost, ResetRequest
from devices.rl.screen_cache import ScreenCache

CLICK_LIST = '{"type": "click", "x": 500, "y": 180}'
LOOK = {"emulation": {"width": 412, "height": 915, "scale": 1.0}, "format": "jpeg", "quality": 80}
SCREEN = {"version": 3, "route": "home", "html": "<h1>首页</h1>"}
HIERARCHY = '<hierarchy rotation="0"><node text="首页"/></hierarchy>'


def _key(screen=SCREEN, look=LOOK, clone="toy"):
    return ScreenCache.key(clone, screen, look)


# --- the cache on its own -----------------------------------------------------------------------


def test_an_image_is_served_only_after_a_second_capture_agreed():
    cache = ScreenCache(verify_every=4)
    key = _key()
    assert cache.lookup(key).image is None
    cache.store(key, b"shot", "")
    assert cache.lookup(key).image is None  # the first reuse captures again
    cache.store(key, b"shot", "")
    served = [cache.lookup(key).image for _ in range(6)]
    # reuses 2, 3 are served, 4 captures again, 5, 6, 7 are served
    assert served == [b"shot", b"shot", None, b"shot", b"shot", b"shot"]
    assert cache.summary()["stored"] == 1 and cache.summary()["verified"] == 1


def test_a_hierarchy_is_served_with_its_image_and_checked_with_it():
    cache = ScreenCache(verify_every=3)
    key = _key()
    cache.store(key, b"shot", HIERARCHY)
    assert cache.lookup(key).hierarchy is None  # the first reuse observes again
    cache.store(key, b"shot", HIERARCHY)
    served = cache.lookup(key)
    assert (served.image, served.hierarchy) == (b"shot", HIERARCHY)
    assert cache.lookup(key).image is None  # the third reuse observes again: the same pixels, ...
    cache.store(key, b"shot", HIERARCHY.replace("首页", "首頁"))  # ... another hierarchy
    summary = cache.summary()
    assert summary["mismatches"] == 1 and summary["images"] == 0
    assert all(cache.lookup(key).hierarchy is None for _ in range(5))


def test_a_screen_whose_captures_disagree_is_never_cached_again():
    cache = ScreenCache()
    key = _key()
    cache.store(key, b"one", "")
    assert cache.lookup(key).image is None
    cache.store(key, b"two", "")
    summary = cache.summary()
    assert summary["mismatches"] == 1 and summary["images"] == 0 and summary["bytes"] == 0
    cache.store(key, b"two", "")
    cache.store(key, b"two", "")
    assert all(cache.lookup(key).image is None for _ in range(40))
    assert cache.summary()["images"] == 0


@pytest.mark.parametrize(
    "other",
    [
        _key(screen={**SCREEN, "html": "<h1>首页 </h1>"}),
        _key(screen={**SCREEN, "route": "list"}),
        _key(look={**LOOK, "quality": 81}),
        _key(look={**LOOK, "emulation": {**LOOK["emulation"], "scale": 1.5}}),
        _key(clone="bank"),
    ],
)
def test_anything_that_changes_the_pixels_changes_the_key(other):
    assert other != _key()


def test_the_version_alone_does_not_change_the_key():
    assert _key(screen={**SCREEN, "version": 9}) == _key()


def test_the_cache_is_bounded_by_entries_and_bytes():
    cache = ScreenCache(entries=2, max_bytes=10)
    keys = [_key(screen={**SCREEN, "html": str(i)}) for i in range(3)]
    for key in keys:
        cache.store(key, b"1234", "")
    assert cache.summary()["images"] == 2 and cache.lookup(keys[0]).image is None  # oldest out
    cache.store(_key(screen={**SCREEN, "html": "big"}), b"12345678", "")
    assert cache.summary()["bytes"] <= 10
    cache.store(_key(screen={**SCREEN, "html": "huge"}), b"x" * 11, "")
    assert cache.summary()["bytes"] <= 10
    # a 5-byte image with a 6-character hierarchy is over the bound: refused, "big" stays
    cache.store(_key(screen={**SCREEN, "html": "tall"}), b"12345", "123456")
    assert (cache.summary()["images"], cache.summary()["bytes"]) == (1, 8)


def test_misses_that_come_together_wait_for_one_capture():
    cache = ScreenCache()
    key = _key()
    first, second, third = cache.lookup(key), cache.lookup(key), cache.lookup(key)
    assert first.lead and first.image is None and first.pending is None
    assert second.pending is third.pending and second.pending is not None
    assert not second.pending.done()
    cache.store(key, b"shot", "")
    assert second.pending.result(0) == b"shot"
    # after the wait the usual rule: the first reuse captures again, later ones are served
    again = [cache.lookup(key, coalesce=False) for _ in range(2)]
    assert [a.image for a in again] == [None, b"shot"]
    assert not any(a.lead or a.pending for a in again)
    assert cache.summary()["waited"] == 2 and cache.summary()["stored"] == 1


def test_a_leader_that_gives_up_sends_its_waiters_to_capture():
    cache = ScreenCache()
    key = _key()
    lead, waiter = cache.lookup(key), cache.lookup(key)
    cache.give_up(key)
    assert waiter.pending is not None and waiter.pending.result(0) is None
    assert cache.lookup(key, coalesce=False) == type(lead)(key)  # capture, lead nothing
    assert cache.lookup(key).lead  # the next miss leads again
    cache.store(key, b"shot", "")
    cache.give_up(key)  # after a store: nothing to release
    assert cache.summary()["stored"] == 1


def test_a_mismatch_releases_the_waiters_with_nothing():
    cache = ScreenCache()
    key = _key()
    cache.store(key, b"one", "")
    assert cache.lookup(key).image is None  # the first reuse: capture again
    cache.store(key, b"two", "")  # disagrees: dropped and never cached again
    assert all(not (lk.lead or lk.pending) for lk in (cache.lookup(key) for _ in range(3)))


def test_coalescing_can_be_turned_off():
    cache = ScreenCache(coalesce=False)
    key = _key()
    assert [(lk.lead, lk.pending) for lk in (cache.lookup(key), cache.lookup(key))] == [(False, None)] * 2


# --- in a host's environments -----------------------------------------------------------------------


def _page_capture(env_host: EnvHost, env: RealbenchEnv) -> bytes:
    device = env_host.env(env.env_id)._device
    return device._run(device._capture(), "capture")


def _page_dump(env_host: EnvHost, env: RealbenchEnv) -> str:
    return env_host.env(env.env_id)._device.hierarchy()


def _image(env: RealbenchEnv) -> bytes:
    assert env._last is not None
    return env._last.observation.image


def _hierarchy(env: RealbenchEnv) -> str:
    assert env._last is not None
    return env._last.observation.hierarchy


@pytest.mark.browser
def test_resets_serve_the_start_screen_that_the_page_itself_draws(env_host, rl_pack):
    envs = [RealbenchEnv(rl_pack, "buy-item", host=env_host, image="jpeg") for _ in range(2)]
    plain = RealbenchEnv(rl_pack, "buy-item", host=env_host, image="jpeg", screen_cache=False)
    try:
        envs[0].reset(seed=1)  # captured and kept
        envs[1].reset(seed=2)  # the first reuse: captured again, compared
        assert env_host.screen_cache.summary() | {"bytes": 0} == {
            "hits": 0,
            "stored": 1,
            "verified": 1,
            "mismatches": 0,
            "not_still": 0,
            "waited": 0,
            "unchanged": 0,
            "unchanged_verified": 0,
            "unchanged_mismatches": 0,
            "images": 1,
            "bytes": 0,
        }
        for env in envs:
            env.step(CLICK_LIST)  # the pages show something else
        envs[0].reset(seed=3)  # served
        summary = env_host.screen_cache.summary()
        assert summary["hits"] == 1 and summary["mismatches"] == 0
        served = _image(envs[0])
        assert served == _page_capture(env_host, envs[0])
        assert _hierarchy(envs[0]) == _page_dump(env_host, envs[0])
        plain.reset(seed=3)
        assert _image(plain) == served and _hierarchy(plain) == _hierarchy(envs[0])
        # a step captures what the action changed: no cache
        envs[0].step(CLICK_LIST)
        assert env_host.screen_cache.summary()["hits"] == 1
        assert _image(envs[0]) != served
    finally:
        for env in (*envs, plain):
            env.close()


@pytest.mark.browser
def test_a_wrong_cached_image_is_caught_by_the_next_check_and_never_served(env_host, rl_pack):
    env_host.screen_cache.verify_every = 1  # every reuse captures again
    env = RealbenchEnv(rl_pack, "buy-item", host=env_host, image="jpeg")
    plain = RealbenchEnv(rl_pack, "buy-item", host=env_host, image="jpeg", screen_cache=False)
    try:
        env.reset(seed=1)
        [entry] = env_host.screen_cache._images.values()
        entry.image = b"\xff\xd8 not what the page draws"
        env.reset(seed=2)
        plain.reset(seed=2)
        assert _image(env) == _image(plain) == _page_capture(env_host, env)
        env.reset(seed=3)
        env.reset(seed=4)
        summary = env_host.screen_cache.summary()
        assert summary["mismatches"] == 1 and summary["hits"] == 0 and summary["images"] == 0
    finally:
        env.close()
        plain.close()


@pytest.mark.browser
def test_a_wrong_cached_hierarchy_is_caught_by_the_next_check_and_never_served(env_host, rl_pack):
    env_host.screen_cache.verify_every = 1
    env = RealbenchEnv(rl_pack, "buy-item", host=env_host, image="jpeg")
    plain = RealbenchEnv(rl_pack, "buy-item", host=env_host, image="jpeg", screen_cache=False)
    try:
        env.reset(seed=1)
        [entry] = env_host.screen_cache._images.values()
        entry.hierarchy = entry.hierarchy.replace('clickable="true"', 'clickable="false"', 1)
        env.reset(seed=2)
        plain.reset(seed=2)
        assert _hierarchy(env) == _hierarchy(plain) == _page_dump(env_host, env)
        for seed in (3, 4):
            env.reset(seed=seed)
            assert _hierarchy(env) == _page_dump(env_host, env)
        summary = env_host.screen_cache.summary()
        assert summary["mismatches"] == 1 and summary["hits"] == 0 and summary["images"] == 0
    finally:
        env.close()
        plain.close()


@pytest.mark.browser
@pytest.mark.parametrize(
    "html",
    [
        '<button data-ev="skip" data-countdown="5">跳过 5</button>',
        '<style>@keyframes spin{to{transform:rotate(1turn)}}</style><div style="animation:spin 1s infinite">载入</div>',
    ],
    ids=["countdown", "animation"],
)
def test_a_screen_that_changes_by_itself_is_always_captured(env_host, rl_pack, html):
    env = RealbenchEnv(rl_pack, "buy-item", host=env_host, image="jpeg")
    try:
        env.reset(seed=1)
        device = env_host.env(env.env_id)._device
        screen = {"version": 99, "route": "home", "html": html}
        for _ in range(3):
            obs = device.show_and_observe(screen)
            assert obs.screenshot.data
        summary = env_host.screen_cache.summary()
        assert summary["not_still"] == 3 and summary["hits"] == 0
        assert summary["stored"] == 1  # the toy's start screen from the reset, nothing else
    finally:
        env.close()


@pytest.mark.browser
def test_restores_into_one_snapshot_share_a_checked_image(env_host, rl_pack):
    envs = [RealbenchEnv(rl_pack, "buy-item", host=env_host, image="jpeg") for _ in range(4)]
    try:
        envs[0].reset(seed=5)
        envs[0].step(CLICK_LIST)
        snap = envs[0].snapshot()
        images = []
        for env in envs[1:]:
            env.restore(snap)
            images.append(_image(env))
        assert len(set(images)) == 1
        assert images[-1] == _page_capture(env_host, envs[-1])
        summary = env_host.screen_cache.summary()
        assert summary["hits"] >= 1 and summary["mismatches"] == 0
        pixels = envs[-1]._last.observation.pixels()
        assert pixels.shape[2] == 3 and np.asarray(pixels).std() > 0
    finally:
        for env in envs:
            env.close()


@pytest.mark.browser
def test_the_page_calls_a_focused_or_scrolled_screen_not_still(env_host, rl_pack):
    """Swaps drop the focus and the scroll positions, so these come from the page's own checks."""
    env = RealbenchEnv(rl_pack, "buy-item", host=env_host, image="jpeg")
    try:
        env.reset(seed=1)
        device = env_host.env(env.env_id)._device
        tall = "".join(f"<p>行{i}</p>" for i in range(200))
        device.show(
            {
                "version": 99,
                "route": "home",
                "html": f'<input id="q"><div class="scroll" id="s" style="height:200px">{tall}</div>',
            }
        )

        def still(script: str) -> bool:
            return device._run(
                device._page_eval(f"() => {{ {script}; return window.__rb.screenIsStill(); }}"), "check"
            )

        assert still("")
        assert not still("document.getElementById('q').focus()")
        assert still("document.getElementById('q').blur()")
        assert not still("document.getElementById('s').scrollTop = 40")
        assert still("document.getElementById('s').scrollTop = 0")
    finally:
        env.close()


@pytest.mark.browser
def test_a_tap_focuses_text_fields_only(env_host, rl_pack):
    """As on Android (touch mode): the browser's compatibility mousedown would focus a tapped button
    or checkbox, and after a tap that swapped the screen, whatever the next screen has under the
    finger, so the hierarchy's focused flag depended on timing."""
    from realbench.actions import Click

    env = RealbenchEnv(rl_pack, "buy-item", host=env_host, image="jpeg")
    try:
        env.reset(seed=1)
        device = env_host.env(env.env_id)._device
        device.show(
            {
                "version": 99,
                "route": "home",
                "html": '<button id="b" style="display:block;width:300px;height:80px">按钮</button>'
                '<input type="checkbox" id="c" style="display:block;width:60px;height:60px">'
                '<input id="q" style="display:block;width:300px;height:60px">',
            }
        )
        width, height = device.emulation.width, device.emulation.height

        def tap_and_focus(element: str) -> str:
            box = device._run(
                device._page_eval(
                    "(id) => { const r = document.getElementById(id).getBoundingClientRect();"
                    " return [r.left + r.width / 2, r.top + r.height / 2]; }",
                    element,
                ),
                "box",
            )
            device.act(Click(x=round(box[0] * 1000 / width), y=round(box[1] * 1000 / height)))
            return device._run(device._page_eval("() => document.activeElement.id || ''"), "focus")

        assert tap_and_focus("b") == ""
        assert tap_and_focus("c") == ""
        assert tap_and_focus("q") == "q"
        assert 'focused="true"' in device.hierarchy()
        assert tap_and_focus("b") == "q"  # a tap elsewhere leaves the field's focus as it was
    finally:
        env.close()


@pytest.mark.browser
def test_a_batched_reset_onto_one_screen_takes_few_captures_and_the_same_image(env_host, rl_pack):
    n = 6
    ids = env_host.create([EnvConfig(pack=rl_pack, task_id="buy-item", image="jpeg") for _ in range(n)])
    plain = RealbenchEnv(rl_pack, "buy-item", host=env_host, image="jpeg", screen_cache=False)
    try:
        results = env_host.reset([ResetRequest(env_id, seed=i) for i, env_id in enumerate(ids)])
        images = {r.observation.image for r in results}
        summary = env_host.screen_cache.summary()
        assert summary["waited"] >= 1 and summary["stored"] == 1 and summary["mismatches"] == 0
        # captures taken: the leader's, re-checks and waits that ran out; fewer than one per page
        assert summary["stored"] + summary["verified"] < n
        plain.reset(seed=0)
        assert images == {_image(plain)}
        # the waiters served the leader's dump: the one each page dumps of itself
        assert {r.observation.hierarchy for r in results} == {_hierarchy(plain)}
        for result, env_id in zip(results, ids, strict=True):
            assert result.observation.hierarchy == env_host.env(env_id)._device.hierarchy()
    finally:
        env_host.close_envs(ids)
        plain.close()


@pytest.mark.browser
def test_pages_that_wait_on_a_screen_that_changes_by_itself_capture_it_themselves(env_host, rl_pack):
    ids = env_host.create([EnvConfig(pack=rl_pack, task_id="buy-item", image="jpeg") for _ in range(4)])
    try:
        env_host.reset([ResetRequest(env_id, seed=1) for env_id in ids])
        before = env_host.screen_cache.summary()
        screen = {"version": 99, "route": "home", "html": '<button data-countdown="5">跳过 5</button>'}
        devices = [env_host.env(env_id)._device for env_id in ids]
        with ThreadPoolExecutor(len(devices)) as pool:
            shots = list(pool.map(lambda d: d.show_and_observe(screen).screenshot.data, devices))
        summary = env_host.screen_cache.summary()
        assert all(shots)
        assert summary["not_still"] == before["not_still"] + len(devices)
        assert summary["hits"] == before["hits"] and summary["stored"] == before["stored"]
        assert not env_host.screen_cache._inflight  # nothing left for a later page to wait on
    finally:
        env_host.close_envs(ids)


NOTHING = '{"type": "click", "x": 500, "y": 600}'  # blank space below the toy's home screen's button


def _unchanged(env_host: EnvHost) -> tuple[int, int, int]:
    summary = env_host.screen_cache.summary()
    return summary["unchanged"], summary["unchanged_verified"], summary["unchanged_mismatches"]


@pytest.mark.browser
def test_a_step_that_leaves_the_page_as_it_was_keeps_its_observation_and_a_change_is_captured(
    env_host, rl_pack
):
    env = RealbenchEnv(rl_pack, "buy-item", host=env_host, image="jpeg")
    plain = RealbenchEnv(rl_pack, "buy-item", host=env_host, image="jpeg", screen_cache=False)
    try:
        env.reset(seed=1)
        plain.reset(seed=1)
        start = _image(env)
        env.step(NOTHING)  # the first such step captures again and compares
        assert _unchanged(env_host) == (0, 1, 0)
        for n in range(1, 4):
            env.step(NOTHING)  # kept, not captured
            assert _unchanged(env_host) == (n, 1, 0)
            assert _image(env) == start == _page_capture(env_host, env)
            assert _hierarchy(env) == _page_dump(env_host, env)
        plain.step(NOTHING)  # screen_cache=False: every step is captured
        assert _unchanged(env_host) == (3, 1, 0) and _image(plain) == start
        env.step(CLICK_LIST)  # another screen: captured
        assert _unchanged(env_host) == (3, 1, 0)
        assert _image(env) != start and _image(env) == _page_capture(env_host, env)
        assert "商品列表" in _hierarchy(env) and "商品00" in _hierarchy(env)
    finally:
        env.close()
        plain.close()


@pytest.mark.browser
@pytest.mark.parametrize(
    "change",
    [
        # a field focused: a caret blinks, the page is not still
        "() => document.querySelector('input').focus()",
        # scrolled: the page is not still
        "() => { const s = document.querySelector('.scroll');"
        " s.insertAdjacentHTML('beforeend', '<div style=\"height:2000px\"></div>'); s.scrollTop = 30; }",
    ],
)
def test_a_page_that_is_not_still_is_captured_at_every_step(env_host, rl_pack, change):
    env = RealbenchEnv(rl_pack, "buy-item", host=env_host, image="jpeg")
    try:
        env.reset(seed=1)
        env.step(NOTHING)
        device = env_host.env(env.env_id)._device
        device._run(device._page_eval(change), "change")
        before = _unchanged(env_host)
        for _ in range(3):
            env.step(NOTHING)
            assert _image(env) == _page_capture(env_host, env)
        assert _unchanged(env_host) == before
    finally:
        env.close()


@pytest.mark.browser
def test_pixels_changed_behind_the_runtimes_back_are_found_by_the_next_check_and_end_the_reuse(
    env_host, rl_pack, caplog
):
    """What the rule cannot see (a page changed with no screen from the server, which the clones'
    runtime never does) is found at the next check: from then on that page's steps are captured."""
    env_host.screen_cache.verify_every = 2
    env = RealbenchEnv(rl_pack, "buy-item", host=env_host, image="jpeg")
    try:
        env.reset(seed=1)
        for _ in range(3):
            env.step(NOTHING)  # checked, checked (2nd), kept
        assert _unchanged(env_host) == (1, 2, 0)
        device = env_host.env(env.env_id)._device
        device._run(
            device._page_eval("() => { document.body.style.background = 'rgb(255, 0, 0)'; }"), "paint"
        )
        with caplog.at_level("WARNING"):
            env.step(NOTHING)  # the 4th: a check, which finds another image
        assert _unchanged(env_host) == (1, 2, 1) and "gave another image" in caplog.text
        assert _image(env) == _page_capture(env_host, env)
        for _ in range(3):
            env.step(NOTHING)
            assert _image(env) == _page_capture(env_host, env)
        assert _unchanged(env_host) == (1, 2, 1)
    finally:
        env.close()
