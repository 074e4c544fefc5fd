"""Screenshots of the lab console's pages for docs/console.md, taken in headless Chromium against
virtual phones (a test rig, not phones) and a run store of synthetic episodes:
``python benchmarks/console_screenshots.py [OUT_DIR]`` (default docs/screenshots/console).

PNGs are reduced to a small palette so that they stay small in the repository.
"""

from __future__ import annotations

import io
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
from PIL import Image  # noqa: E402

from realbench.hierarchy import Hierarchy, Selector  # noqa: E402
from tests.console_support import CHROMIUM, CHROMIUM_ARGS, running_console  # noqa: E402
from tests.farm_support import BANK, TICKET  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def save(page, out: Path, name: str, *, full: bool = False) -> None:  # noqa: ANN001
    png = page.screenshot(full_page=full)
    img = Image.open(io.BytesIO(png)).convert("RGB")
    if img.height > 2200:
        img = img.crop((0, 0, img.width, 2200))
    img.quantize(colors=64, method=Image.Quantize.MEDIANCUT).save(out / f"{name}.png", optimize=True)
    print(out / f"{name}.png", (out / f"{name}.png").stat().st_size // 1024, "KiB")


def point(page, url: str, serial: str, selector: Selector) -> tuple[float, float]:  # noqa: ANN001
    tree = Hierarchy(httpx.get(f"{url}/api/phones/{serial}/hierarchy", timeout=30).text)
    node = tree.find_one(selector)
    assert node is not None, selector
    box = page.locator("#screen").bounding_box()
    cx, cy = node.bounds.center
    return box["x"] + cx / 1080 * box["width"], box["y"] + cy / 2400 * box["height"]


def main() -> None:
    from playwright.sync_api import sync_playwright

    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "screenshots" / "console"
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, running_console(Path(tmp)) as c, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 860})
        s0, s1 = c.serials
        httpx.post(f"{c.url}/api/phones/{s0}/start", json={"package": TICKET}, timeout=60)
        httpx.post(f"{c.url}/api/phones/{s1}/start", json={"package": BANK}, timeout=60)
        httpx.post(f"{c.url}/api/phones/{s1}/release", json={}, timeout=60)
        page.goto(f"{c.url}/fleet")
        page.wait_for_selector(f'#fleet tr[data-serial="{s1}"]', timeout=60_000)
        save(page, out, "fleet")
        # phone page: inspector over a menu button, a recording with two steps
        page.set_viewport_size({"width": 1280, "height": 1000})
        page.goto(f"{c.url}/phone/{s0}")
        page.wait_for_function("window.rbFrames >= 2", timeout=60_000)
        page.select_option("#rec-pack", label="train_ticketing")
        page.select_option("#rec-task", "lookup-passenger-count")
        page.click("#rec-start button")
        page.wait_for_selector("#rec-body:not([hidden])")
        page.click(f'button[data-app="{TICKET}"]')
        page.check("input[name=rec-default][value=golden]")
        page.mouse.click(*point(page, c.url, s0, Selector(text="我的订单")))
        page.wait_for_function(
            "document.querySelectorAll('#rec-steps tbody tr').length === 2", timeout=30_000
        )
        page.click("button[data-key=back]")
        page.mouse.move(*point(page, c.url, s0, Selector(text="候补购票")))
        page.wait_for_function(
            "document.getElementById('inspector').textContent.includes('menu_2')", timeout=30_000
        )
        time.sleep(1.0)
        save(page, out, "phone", full=True)
        # the interlock's dialog on the commit test screen
        page.goto(f"{c.url}/phone/{s1}")
        page.wait_for_function("window.rbFrames >= 2", timeout=60_000)
        page.mouse.click(*point(page, c.url, s1, Selector(text="提交订单")))
        page.wait_for_selector("#confirm-dialog[open]", timeout=30_000)
        save(page, out, "phone-boundary")
        page.click("#confirm-cancel")
        # runs, a store's table, an episode side by side
        page.set_viewport_size({"width": 1280, "height": 860})
        page.goto(f"{c.url}/runs")
        save(page, out, "runs")
        page.goto(f"{c.url}/runs/1?model=synthetic:trained")
        save(page, out, "store")
        page.goto(f"{c.url}/runs/1/episode?id=synthetic:trained@real/task1/s0/r0/a0")
        save(page, out, "episode", full=True)
        # labelling: one label given by two people, then the next episode, blind
        for who, key in (("ann", "s"), ("bob", "f")):
            page.goto(f"{c.url}/label?store=0&labeller={who}")
            page.wait_for_selector("#label-item:not([hidden])", timeout=30_000)
            page.keyboard.press(key)
            page.wait_for_selector("#label-reveal:not([hidden])")
        save(page, out, "label-saved", full=True)
        page.keyboard.press("n")
        page.wait_for_function("document.querySelector('#label-success').disabled === false")
        save(page, out, "label", full=True)
        browser.close()


if __name__ == "__main__":
    main()
