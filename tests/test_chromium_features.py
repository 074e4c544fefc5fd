"""Feature switches of the clone browser: one --disable-features that keeps Playwright's list (what
switching off the deferral of a tap's tasks buys a page is tested in tests/test_clone_device.py)."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import pytest

from devices import chromium_features
from devices.chromium_features import DISABLE, launch_args, playwright_disabled_features
from devices.clone_browser import DEFAULT_CHROMIUM, BrowserPool
from devices.rl.browser import chromium_command_lines, process_type


def test_every_disable_switch_is_folded_into_one_last_switch_with_playwrights_list():
    defaults = playwright_disabled_features()
    assert defaults and "PaintHolding" in defaults  # read from the driver Playwright runs
    args = launch_args(["--a", f"{DISABLE}One,Two", "--b", f"{DISABLE}Two,Three,", "--c"])
    assert args[:3] == ["--a", "--b", "--c"]
    [last] = [a for a in args if a.startswith(DISABLE)]
    assert args[-1] == last
    names = last[len(DISABLE) :].split(",")
    assert names == [*defaults, "One", "Two", "Three"]  # no duplicates, no empty names


def test_arguments_without_a_disable_switch_pass_unchanged():
    assert launch_args(("--x", "--enable-features=A")) == ["--x", "--enable-features=A"]


def test_without_playwrights_list_the_callers_switch_is_dropped_not_left_to_clobber_it(monkeypatch, caplog):
    monkeypatch.setattr(chromium_features, "playwright_disabled_features", lambda: None)
    with caplog.at_level(logging.WARNING, logger="devices.chromium_features"):
        assert launch_args(["--x", f"{DISABLE}Mine"]) == ["--x"]
    assert "Mine" in caplog.text


def test_a_driver_without_the_list_is_reported_as_none(monkeypatch, tmp_path):
    fake = tmp_path / "playwright"
    (fake / "driver" / "package" / "lib").mkdir(parents=True)
    (fake / "driver" / "package" / "lib" / "coreBundle.js").write_text("var somethingElse = [1];")
    (fake / "__init__.py").write_text("")
    monkeypatch.setattr("playwright.__file__", str(fake / "__init__.py"))
    playwright_disabled_features.cache_clear()
    try:
        assert playwright_disabled_features() is None
    finally:
        monkeypatch.undo()
        playwright_disabled_features.cache_clear()


def _browsers() -> dict[int, list[str]]:
    """Command lines of the browser processes below this one (not their helpers, nor a stand-in
    for Chromium some other test started), by pid."""
    return {
        pid: argv
        for pid, argv in chromium_command_lines(os.getpid()).items()
        if process_type(argv) == "browser" and Path(argv[0]).name == Path(DEFAULT_CHROMIUM).name
    }


def _new_browser(before: dict[int, list[str]]) -> list[str]:
    [argv] = [argv for pid, argv in _browsers().items() if pid not in before]
    return argv


@pytest.mark.browser
def test_the_browser_keeps_playwrights_disabled_features_and_gets_the_clones():
    """Chromium applies only the last --disable-features: in the browser's own command line it must
    carry every feature a browser Playwright starts on its own has disabled, and the clone's."""

    async def plain_switches() -> list[str]:
        from playwright.async_api import async_playwright

        async with async_playwright() as p:
            before = _browsers()
            browser = await p.chromium.launch(executable_path=DEFAULT_CHROMIUM, headless=True)
            try:
                return _new_browser(before)
            finally:
                await browser.close()

    [playwrights] = [a for a in asyncio.run(plain_switches()) if a.startswith(DISABLE)]
    before = _browsers()
    with BrowserPool() as pool:
        assert pool.running
        argv = _new_browser(before)
    last = [a for a in argv if a.startswith(DISABLE)][-1]
    applied = set(last[len(DISABLE) :].split(","))
    assert set(playwrights[len(DISABLE) :].split(",")) <= applied
    assert set(chromium_features.CLONE_DISABLED_FEATURES) <= applied
