"""Feature switches of the clone browser: one --disable-features and one --enable-features that keep
Playwright's lists (what switching off the deferral of a tap's tasks buys a page is tested in
tests/test_clone_device.py)."""

from __future__ import annotations

import asyncio
import logging
import os
from pathlib import Path

import pytest

from devices import chromium_features
from devices.chromium_features import DISABLE, ENABLE, launch_args, playwright_disabled_features
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


def test_arguments_without_feature_switches_pass_unchanged():
    assert launch_args(("--x", "--y=1")) == ["--x", "--y=1"]


def test_every_enable_switch_is_folded_into_one_with_playwrights_list():
    """Chromium keeps only the last --enable-features: a caller's would drop Playwright's (its newer
    screenshot path among them), a second of the caller's the first."""
    enabled = chromium_features.playwright_features("enabled")
    assert enabled and "CDPScreenshotNewSurface" in enabled
    args = launch_args(["--enable-features=A,B", "--x", f"{DISABLE}D", "--enable-features=B,C,"])
    assert [a for a in args if a.startswith(ENABLE)] == [ENABLE + ",".join((*enabled, "A", "B", "C"))]
    assert args[0] == "--x" and args[-1].startswith(DISABLE)


def test_without_playwrights_list_the_callers_switch_is_dropped_not_left_to_clobber_it(monkeypatch, caplog):
    monkeypatch.setattr(chromium_features, "playwright_features", lambda kind: None)
    with caplog.at_level(logging.WARNING, logger="devices.chromium_features"):
        assert launch_args(["--x", f"{DISABLE}Mine", f"{ENABLE}Ours"]) == ["--x"]
    assert "Mine" in caplog.text and "Ours" in caplog.text


def _fake_driver(monkeypatch, tmp_path, source: str) -> None:
    fake = tmp_path / "playwright"
    (fake / "driver" / "package" / "lib").mkdir(parents=True)
    (fake / "driver" / "package" / "lib" / "coreBundle.js").write_text(source)
    (fake / "__init__.py").write_text("")
    monkeypatch.setattr("playwright.__file__", str(fake / "__init__.py"))
    chromium_features.playwright_features.cache_clear()


def test_a_driver_without_the_list_is_reported_as_none(monkeypatch, tmp_path):
    _fake_driver(monkeypatch, tmp_path, "var somethingElse = [1];")
    try:
        assert playwright_disabled_features() is None
        assert chromium_features.playwright_features("enabled") is None
    finally:
        monkeypatch.undo()
        chromium_features.playwright_features.cache_clear()


def test_the_drivers_lists_are_read_without_comments_and_as_its_environment_decides(monkeypatch, tmp_path):
    source = """
    disabledFeatures = [
      // "Commented" out
      "One", // why
      "Two"
    ].filter(Boolean);
    enabledFeatures = () => [
      process.env.LEGACY_SHOT ? "" : "NewShot",
      // See "https://example.invalid/Quoted"
      "Other"
    ].filter(Boolean);
    """
    _fake_driver(monkeypatch, tmp_path, source)
    try:
        assert playwright_disabled_features() == ("One", "Two")
        assert chromium_features.playwright_features("enabled") == ("NewShot", "Other")
        monkeypatch.setenv("LEGACY_SHOT", "1")
        chromium_features.playwright_features.cache_clear()
        assert chromium_features.playwright_features("enabled") == ("Other",)
    finally:
        monkeypatch.undo()
        chromium_features.playwright_features.cache_clear()


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
def test_the_browser_keeps_playwrights_features_and_gets_the_clones():
    """Chromium applies only the last --disable-features and the last --enable-features: in the
    browser's own command line they must carry every feature a browser Playwright starts on its own
    has disabled or enabled, and the clone's."""

    async def plain_switches() -> list[str]:
        from playwright.async_api import async_playwright

        async with async_playwright() as p:
            before = _browsers()
            browser = await p.chromium.launch(executable_path=DEFAULT_CHROMIUM, headless=True)
            try:
                return _new_browser(before)
            finally:
                await browser.close()

    plain = asyncio.run(plain_switches())
    before = _browsers()
    with BrowserPool(extra_args=(f"{ENABLE}NetworkServiceInProcess2",)) as pool:
        assert pool.running
        argv = _new_browser(before)
    for switch, ours in (
        (DISABLE, set(chromium_features.CLONE_DISABLED_FEATURES)),
        (ENABLE, {"NetworkServiceInProcess2"}),
    ):
        [playwrights] = [a for a in plain if a.startswith(switch)]
        last = [a for a in argv if a.startswith(switch)][-1]
        applied = set(last[len(switch) :].split(","))
        assert set(playwrights[len(switch) :].split(",")) <= applied, switch
        assert ours <= applied
