"""Lab console: live-view frames per second and tap-to-visible latency on a virtual phone.

The live view is what the phone page runs: one screenshot request after another at 540 px width
(`GET /api/phones/{serial}/screen?width=540`). Tap-to-visible is the time from sending a tap
(`POST .../act`, through the pool's lease and the interlock) until a frame of that stream shows
the screen changed (outside the status bar). The phone is a virtual phone (the ticket app's static
placeholder screen) behind the real adb server: a test rig, not a phone.

    python benchmarks/console.py [--seconds 10] [--taps 20] [--browser]
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
from machine_info import machine_line  # noqa: E402
from PIL import Image, ImageChops  # noqa: E402

from realbench.hierarchy import Hierarchy, Selector  # noqa: E402
from tests.console_support import running_console  # noqa: E402
from tests.farm_support import TICKET  # noqa: E402

WIDTH = 540


def machine() -> str:
    return machine_line()


def changed(a: bytes, b: bytes) -> bool:
    ia, ib = (Image.open(io.BytesIO(x)).convert("L") for x in (a, b))
    top = round(ia.height * 0.05)
    hist = ImageChops.difference(
        ia.crop((0, top, ia.width, ia.height)), ib.crop((0, top, ib.width, ib.height))
    ).histogram()
    return sum(hist[10:]) / max(1, sum(hist)) > 0.01


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--taps", type=int, default=20)
    ap.add_argument("--browser", action="store_true", help="also count the phone page's frames in Chromium")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, running_console(Path(tmp), phones=1, store=False) as c:
        serial = c.serials[0]
        base = f"{c.url}/api/phones/{serial}"
        client = httpx.Client(timeout=30)
        client.post(base + "/start", json={"package": TICKET})
        screen = f"{base}/screen?width={WIDTH}"
        for _ in range(3):
            client.get(screen)
        # 1. frames per second of the live view
        t0, frames, sizes = time.perf_counter(), 0, []
        while time.perf_counter() - t0 < args.seconds:
            sizes.append(len(client.get(screen).content))
            frames += 1
        fps = frames / (time.perf_counter() - t0)
        # 2. tap-to-visible: the stream runs in a thread, like the page's loop
        latest: dict[str, object] = {"frame": client.get(screen).content, "at": time.perf_counter()}
        stop = threading.Event()

        def stream() -> None:
            s = httpx.Client(timeout=30)
            while not stop.is_set():
                data = s.get(screen).content
                latest.update(frame=data, at=time.perf_counter())

        th = threading.Thread(target=stream, daemon=True)
        th.start()
        tree = Hierarchy(client.get(base + "/hierarchy").text)
        button = tree.find_one(Selector(text="车票预订"))
        assert button is not None
        cx, cy = button.bounds.center
        tap = {"type": "click", "x": round(cx * 1000 / 1079), "y": round(cy * 1000 / 2399)}
        latencies, acts = [], []
        for _ in range(args.taps):
            time.sleep(0.3)
            before = latest["frame"]
            sent = time.perf_counter()
            r = client.post(base + "/act", json=tap)
            acts.append(time.perf_counter() - sent)
            assert r.status_code == 200, r.text
            deadline = sent + 10
            while time.perf_counter() < deadline:
                if latest["at"] > sent and changed(before, latest["frame"]):  # type: ignore[arg-type, operator]
                    latencies.append(latest["at"] - sent)  # type: ignore[operator]
                    break
                time.sleep(0.005)
            client.post(base + "/act", json={"type": "key", "key": "back"})
        stop.set()
        th.join(timeout=10)
        client.post(base + "/release", json={})
        # 3. the phone page itself in headless Chromium (its own frame counter)
        page_fps = None
        if args.browser:
            from playwright.sync_api import sync_playwright

            from tests.console_support import CHROMIUM, CHROMIUM_ARGS

            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
                page = browser.new_page()
                page.goto(f"{c.url}/phone/{serial}")
                page.wait_for_function("window.rbFrames >= 3", timeout=60_000)
                f0, t0 = page.evaluate("window.rbFrames"), time.perf_counter()
                time.sleep(args.seconds)
                page_fps = (page.evaluate("window.rbFrames") - f0) / (time.perf_counter() - t0)
                browser.close()
    out = {
        "machine": machine(),
        "live_view_width_px": WIDTH,
        "frames_per_s": round(fps, 1),
        "frame_kib_median": round(statistics.median(sizes) / 1024, 1),
        "tap_to_visible_ms_p50": round(1000 * pct(latencies, 0.5)),
        "tap_to_visible_ms_p95": round(1000 * pct(latencies, 0.95)),
        "act_request_ms_p50": round(1000 * pct(acts, 0.5)),
        "taps_seen": f"{len(latencies)}/{args.taps}",
        "page_frames_per_s": None if page_fps is None else round(page_fps, 1),
    }
    print(json.dumps(out, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
