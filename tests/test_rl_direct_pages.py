"""RL pages opened over the direct DevTools connection (devices/rl/direct_page.py): emulated as a
Playwright page of the same browser is, unseen by Playwright, closed with their environment."""

from __future__ import annotations

import pytest

from devices.clone_browser import Launcher
from devices.rl.config import EnvConfig
from devices.rl.direct_page import DirectPage
from devices.rl.host import EnvHost, ResetRequest, StepRequest
from tests.rl_support import one_env, playwright_path

pytestmark = pytest.mark.browser

# What a page can tell about its emulation: metrics, touch, focus, locale and time zone, and the
# widths of one string in each generic font family (the families Playwright sets for its pages).
FACTS_JS = """() => {
  const width = (family) => {
    const span = document.createElement('span');
    span.style.fontFamily = family;
    span.textContent = 'Realbench 车票 0123';
    document.body.appendChild(span);
    const w = span.getBoundingClientRect().width;
    span.remove();
    return w;
  };
  return {
    dpr: devicePixelRatio, inner: [innerWidth, innerHeight], outer: [outerWidth, outerHeight],
    screen: [screen.width, screen.height], orientation: screen.orientation.type,
    touch: navigator.maxTouchPoints, coarse: matchMedia('(pointer: coarse)').matches,
    hover: matchMedia('(hover: none)').matches, focus: document.hasFocus(),
    zone: Intl.DateTimeFormat().resolvedOptions().timeZone,
    locale: Intl.DateTimeFormat().resolvedOptions().locale, languages: navigator.languages,
    fonts: ['', 'serif', 'sans-serif', 'monospace', 'cursive', 'fantasy'].map(width),
  };
}"""


def test_a_direct_page_reports_what_a_playwright_page_of_its_browser_reports(env_host, rl_pack):
    env_id = one_env(env_host, rl_pack)
    device = env_host.env(env_id)._device
    assert device is not None and isinstance(device._page, DirectPage)
    direct = device._run(device._page_eval(FACTS_JS), "facts")

    # a page Playwright opens in the same browser, on another session of the same clone
    other = env_host.new_session(env_host.env(env_id).clone, env_host.env(env_id)._home_state(), None)
    url = f"{env_host.server_url}/s/{other.id}"

    async def playwright_facts() -> dict:
        opened = await device.pool.open_page(device.emulation, url)
        try:
            return dict(await opened.page.evaluate(FACTS_JS))
        finally:
            await opened.page.close()

    assert device.pool.call(playwright_facts()) == direct
    assert direct["dpr"] == pytest.approx(device.emulation.scale) and direct["touch"] >= 1


def test_no_playwright_runs_beside_direct_pages_and_a_closed_environment_closes_its_page(env_host, rl_pack):
    env_ids = env_host.create([EnvConfig(pack=rl_pack, task_id="buy-item", image="jpeg")] * 3)
    env_host.reset([ResetRequest(i, seed=i) for i in env_ids])
    [t] = env_host.step([StepRequest(env_ids[0], '{"type": "click", "x": 500, "y": 180}')])
    assert not t.info.get("aborted")
    pages = [env_host.env(i)._device._page for i in env_ids]
    assert all(isinstance(p, DirectPage) for p in pages)
    pool = env_host.env(env_ids[0])._device.pool
    # the pool started its browser itself: no Playwright driver, nothing of Playwright connected
    assert pool.launcher is Launcher.DIRECT and pool._browser is None and pool._pw is None
    # three pages over the pool's renderers' worth of contexts, in turn
    assert len({p.context_id for p in pages}) == min(3, pool.renderers)

    connection = pages[0].session.connection

    async def targets() -> set[str]:
        listed = await connection.send("Target.getTargets", {"filter": [{"type": "page"}]})
        return {t["targetId"] for t in listed["targetInfos"]}

    assert {p.target_id for p in pages} <= pool.call(targets())
    env_host.close_envs([env_ids[0]])
    assert pages[0].target_id not in pool.call(targets())
    assert pages[1].target_id in pool.call(targets()) and not pages[1].is_closed()


def test_with_the_direct_path_off_pages_are_playwrights(rl_pack):
    with playwright_path(), EnvHost() as env_host:
        env_id = one_env(env_host, rl_pack)
        assert not isinstance(env_host.env(env_id)._device._page, DirectPage)
