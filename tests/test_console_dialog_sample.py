"""The lab console's confirm dialog as a path of the generated interlock attacks: a fixed sample.

The fuzzer's `console` path (tests/interlock_fuzz_cases.py) sends each case through the guard the
console arms (every pack's stop lists, one policy for all packs), not through the console's page:
driving Chromium per case would cost seconds a case against the fuzzer's ~0.15 s. This sample
takes the first generated console-path touch traps of a fixed seed and sends each through the
phone page itself: the operator's pointer on the live image, the blocked-tap dialog, and every way
an operator can answer it without the deliberate click on Send — Enter on the default Cancel,
Escape, a click on Cancel, Enter in the name field, Enter with the focus on a named Send. None may
send: the verdict is the virtual phone's own (the case screen's commit records, its input log).
Each case is first sent straight to the phone, where it must commit (the trap works).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from realbench.actions import Click, LongPress
from tests.console_support import ConsoleBench, console_bench
from tests.interlock_fuzz_cases import FuzzCase, make_case, px_of
from tests.test_console import _page, _point_on_image, browser  # noqa: F401 - a fixture

farm = pytest.mark.skipif(shutil.which("adb") is None, reason="needs Debian's adb")
pytestmark = [farm, pytest.mark.farm, pytest.mark.browser]

SEED = 20261203
SAMPLE = 6
# what the page sends from the pointer: a click, or a press held past 600 ms (a long press)
PAGE_INPUTS = ("tap_inside", "tap_edge", "tap_slop", "long_press")


def sample(seed: int = SEED, k: int = SAMPLE, scan: int = 2000) -> list[FuzzCase]:
    """The first `k` console-path touch traps of `seed` that the page's pointer can send."""
    out = []
    for i in range(scan):
        c = make_case(seed, i)
        if c.path == "console" and c.intent == "commit" and c.input_form in PAGE_INPUTS:
            out.append(c)
            if len(out) == k:
                break
    return out


CASES = sample()
ANSWERED = (
    "document.getElementById('confirm-dialog').open || document.getElementById('message').textContent !== ''"
)


DialogBench = ConsoleBench


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DialogBench]:
    # default packs: every pack under taskpacks/, as the fuzzer's console path arms its guard
    with console_bench(tmp_path_factory.mktemp("console-dialog")) as b:
        yield b


def _post(bench: DialogBench, path: str, body: dict[str, Any]) -> Any:
    import httpx

    return httpx.post(f"{bench.url}/api/phones/{bench.serial}{path}", json=body, timeout=120)


def test_the_sample_is_console_touch_traps() -> None:
    assert len(CASES) == SAMPLE
    assert {c.path for c in CASES} == {"console"} and {c.intent for c in CASES} == {"commit"}


@pytest.mark.parametrize("case", CASES, ids=[c.tag() for c in CASES])
def test_no_answer_to_the_blocked_input_dialog_sends_it(
    bench: DialogBench,
    browser: object,  # noqa: F811 - the fixture imported above
    case: FuzzCase,
) -> None:
    action = case.steps[0]
    assert isinstance(action, Click | LongPress)
    # unguarded: the trap commits
    bench.install_screens(dict(case.screens))
    phone = bench.pool.phone(bench.serial)
    phone.stop_app(case.package)
    phone.start_app(case.package)
    phone.observe()  # what an operator's page shows, then what a single-dump check would read
    phone.hierarchy()
    phone.act(action)
    assert bench.commits(), f"the trap did not commit unguarded: {case.describe()}"

    bench.install_screens(dict(case.screens))
    assert _post(bench, "/start", {"package": case.package}).status_code == 200
    page = _page(browser)
    page.goto(f"{bench.url}/phone/{bench.serial}")
    page.evaluate("localStorage.removeItem('rb-operator')")
    page.reload()
    page.wait_for_function("window.rbFrames >= 1", timeout=60_000)
    x, y = _point_on_image(page, *px_of(action.x, action.y))
    # One read of the screen before the guard's, as the fuzzer's observation makes: a late dialog
    # is drawn after the guard's first dump, which the guard's second one catches. The page's own
    # reads (the inspector's, on the pointer's way in) race with its click and may be cached.
    phone.hierarchy()
    dialog = page.locator("#confirm-dialog")
    events = bench.vphone.events
    before = len(events)

    def blocked_input() -> None:
        page.evaluate("document.getElementById('message').textContent = ''")
        if isinstance(action, LongPress):
            page.mouse.move(x, y)
            page.mouse.down()
            page.wait_for_timeout(800)
            page.mouse.up()
        else:
            page.mouse.click(x, y)
        # the dialog, or whatever else the page said instead (sent, an error), not a minute's wait
        page.wait_for_function(ANSWERED, timeout=60_000)
        said = page.evaluate("document.getElementById('message').textContent")
        assert dialog.is_visible(), (
            f"no dialog; the page said {said!r}; {len(bench.commits())} commits, "
            f"{len(events) - before} input events: {case.describe()}"
        )
        assert page.evaluate("document.activeElement.id") == "confirm-cancel"

    def not_sent(how: str) -> None:
        dialog.wait_for(state="hidden", timeout=10_000)
        page.wait_for_function("document.getElementById('message').textContent.startsWith('not sent')")
        page.evaluate("document.getElementById('message').textContent = ''")
        assert not bench.commits(), f"{how} sent {case.describe()}"
        assert len(events) == before, f"{how}: {len(events) - before} input events reached the phone"

    blocked_input()
    page.keyboard.press("Enter")
    not_sent("Enter on the default Cancel")
    blocked_input()
    page.keyboard.press("Escape")
    not_sent("Escape")
    blocked_input()
    page.click("#confirm-cancel")
    not_sent("a click on Cancel")
    blocked_input()
    page.fill("#confirm-operator", "tester")
    page.focus("#confirm-operator")
    page.keyboard.press("Enter")
    not_sent("Enter in the name field")
    blocked_input()
    page.fill("#confirm-operator", "tester")
    page.focus("#confirm-send")
    page.keyboard.press("Enter")
    not_sent("Enter on a named Send")
    assert not page.errors
    _post(bench, "/release", {})
    page.close()
