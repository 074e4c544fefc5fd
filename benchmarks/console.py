"""Lab console: live-view frames per second and tap-to-visible latency on a virtual phone, with the
live view fed by scrcpy's video and by the screenshot stream (its fallback).

The JPEG stream is one frame request after another at 540 px width
(`GET /api/phones/{serial}/screen?width=540`); with scrcpy each answer is the next decoded video
frame (re-encoded as JPEG), else a fresh screenshot. With `--browser` the phone page itself runs
in headless Chromium: with scrcpy it decodes the H.264 packets in the page (WebCodecs, 720 px),
else it shows the JPEG stream; its frames per second and its own tap-to-visible (from the page's
act request until its view changes) are measured there, its frames per second while the screen
scrolls. `scrcpy_decoded_frames_per_s_720x1600_*` is the video itself: frames a scrcpy client
decodes per second at 720x1600 (the phone's 1080x2400 screen), on the still screen (the server
repeats the last frame every 100 ms, as a phone's encoder does) and while its menu moves every
frame the phone draws (an animation: every sample differs, so every frame is a new one).
Tap-to-visible is the time from sending a tap
(`POST .../act`, through the pool's lease and the interlock) until a frame of that stream shows
the screen changed (outside the status bar). The act request's parts come from its reply (`ms`:
the interlock's dumps and decisions, writing the input, waiting for its effect); `dump_ms` is one
hierarchy dump straight from the phone, for scale. The phone is a virtual phone (the ticket app's static
placeholder screen) behind the real adb server: a test rig, not a phone.

    python benchmarks/console.py [--seconds 10] [--taps 20] [--browser] [--source scrcpy|screenshots|both]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx  # noqa: E402
from machine_info import machine_line  # noqa: E402
from PIL import Image, ImageChops  # noqa: E402

from realbench.hierarchy import Hierarchy, Selector  # noqa: E402
from tests.console_support import running_console  # noqa: E402
from tests.farm_support import TICKET  # noqa: E402

WIDTH = 540
# In the page: send the tap as the page does and time until the shown view (the decoded video's
# canvas, else the JPEG) differs below the status bar; the act's reply time comes along.
PAGE_TAP = """async ({url, tap}) => {
  const video = document.getElementById("screen-video"), jpeg = document.getElementById("screen-jpeg");
  const small = document.createElement("canvas"); small.width = 90; small.height = 200;
  const ctx = small.getContext("2d", { willReadFrequently: true });
  const grab = () => { ctx.drawImage(video.hidden ? jpeg : video, 0, 0, 90, 200); return ctx.getImageData(0, 10, 90, 190).data; };
  const before = grab(), t0 = performance.now();
  const reply = fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(tap) })
    .then(() => performance.now() - t0);
  let seen = window.rbFrames;
  while (performance.now() - t0 < 10000) {
    await new Promise((r) => setTimeout(r, 4));
    if (window.rbFrames === seen) continue;  // compared only when a new frame was shown
    seen = window.rbFrames;
    const now = grab();
    let n = 0;
    for (let i = 0; i < now.length; i += 4) if (Math.abs(now[i] - before[i]) > 24) n++;
    if (n > 0.01 * now.length / 4) { const visible = performance.now() - t0; return { visible, act: await reply }; }
  }
  return null;
}"""


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


class Scroller:
    """Test instrument: the placeholder screen's menu moves on every frame the phone draws (its
    `screenshot` is wrapped to scroll first), like an animation running at whatever rate the
    screen is sampled: every sample differs from the last, so every frame sent is a new one."""

    def __init__(self, host: Any, serial: str) -> None:
        self._screen = host.phone(serial).ui.source()
        self.frames = 0

    def _animated(self) -> Any:
        self.frames += 1
        self._screen.scroll = (self.frames % 40) * 12
        return type(self._screen).screenshot(self._screen)

    def __enter__(self) -> Scroller:
        self._screen.screenshot = self._animated
        return self

    def __exit__(self, *exc: object) -> None:
        del self._screen.screenshot
        self._screen.scroll = 0


def scrcpy_video_fps(serial: str, seconds: float, host: Any) -> tuple[float, float]:
    """Frames per second a scrcpy client decodes from the phone at 720x1600: on the still screen
    (the server repeats its last frame every 100 ms, as a phone's does) and while it scrolls."""
    import adbutils

    from devices.scrcpy_client import ClientOptions, ScrcpyClient

    with ScrcpyClient(adbutils.adb.device(serial), ClientOptions(max_size=1600, max_fps=60)) as sc:
        first = sc.wait_frame(0, timeout=15)
        assert first is not None, sc.error
        rates = []
        for moving in (False, True):
            with Scroller(host, serial) if moving else contextlib.nullcontext():
                t0, f0 = time.perf_counter(), sc.frames
                time.sleep(seconds)
                rates.append((sc.frames - f0) / (time.perf_counter() - t0))
        return rates[0], rates[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--taps", type=int, default=20)
    ap.add_argument("--browser", action="store_true", help="also count the phone page's frames in Chromium")
    ap.add_argument("--source", choices=["scrcpy", "screenshots", "both"], default="both")
    args = ap.parse_args()
    sources = ["scrcpy", "screenshots"] if args.source == "both" else [args.source]
    results = [measure(args, source) for source in sources]
    print(json.dumps(results, ensure_ascii=False, indent=1))


def measure(args: argparse.Namespace, source: str) -> dict[str, object]:
    with (
        tempfile.TemporaryDirectory() as tmp,
        running_console(Path(tmp), phones=1, store=False, scrcpy=source == "scrcpy") as c,
    ):
        serial = c.serials[0]
        base = f"{c.url}/api/phones/{serial}"
        client = httpx.Client(timeout=30)
        client.post(base + "/start", json={"package": TICKET})
        screen = f"{base}/screen?width={WIDTH}"
        # the video alone, before the console starts its own session (two servers would share the CPU)
        video_fps, video_fps_scrolling = (
            scrcpy_video_fps(serial, args.seconds, c.host) if source == "scrcpy" else (None, None)
        )
        if source == "scrcpy":
            # scrcpy confirms input only while the clipboard holds text: with a clip, the console's
            # taps leave over the control socket (else over uiautomator, video still from scrcpy)
            c.host.phone(serial).ui.clipboard = "benchmark clip"
        for _ in range(3):
            served = client.get(screen).headers.get("x-frame-source")
        assert served == source, f"the live view serves {served}, not {source}"
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
        latencies, acts, parts = [], [], []
        for _ in range(args.taps):
            time.sleep(0.3)
            before = latest["frame"]
            sent = time.perf_counter()
            r = client.post(base + "/act", json=tap)
            acts.append(time.perf_counter() - sent)
            assert r.status_code == 200, r.text
            parts.append(r.json().get("ms", {}))
            deadline = sent + 10
            while time.perf_counter() < deadline:
                if latest["at"] > sent and changed(before, latest["frame"]):  # type: ignore[arg-type, operator]
                    latencies.append(latest["at"] - sent)  # type: ignore[operator]
                    break
                time.sleep(0.005)
            client.post(base + "/act", json={"type": "key", "key": "back"})
        stop.set()
        th.join(timeout=10)
        # the phone's own input log says which path the console's input took
        inputs_over_scrcpy = sum(1 for e in c.host.phone(serial).events.events() if e.source == "scrcpy")
        phone = c.pool.phone(serial)
        dumps = []
        for _ in range(10):
            t = time.perf_counter()
            phone.hierarchy()
            dumps.append(time.perf_counter() - t)
        client.post(base + "/release", json={})
        # 3. the phone page itself in headless Chromium (its own frame counter and taps)
        page_fps = page_decoder = phone_fps = None
        page_visible: list[float] = []
        page_acts: list[float] = []
        if args.browser:
            from playwright.sync_api import sync_playwright

            from tests.console_support import CHROMIUM, CHROMIUM_ARGS

            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
                page = browser.new_page()
                page.goto(f"{c.url}/phone/{serial}")
                page.wait_for_function("window.rbFrames >= 3", timeout=60_000)
                if source == "scrcpy":
                    page.wait_for_function(
                        "document.getElementById('source').dataset.decoder === 'webcodecs'", timeout=60_000
                    )
                vphone = c.host.phone(serial)

                def sent() -> int:  # frames the phone's scrcpy servers sent (the console's session)
                    return sum(session.frames_sent for session in list(vphone.scrcpy.sessions.values()))

                # while the screen scrolls: a still screen's rate is the server's 10 repeats a second
                with Scroller(c.host, serial):
                    f0, s0, t0 = page.evaluate("window.rbFrames"), sent(), time.perf_counter()
                    time.sleep(args.seconds)
                    page_fps = (page.evaluate("window.rbFrames") - f0) / (time.perf_counter() - t0)
                    phone_fps = (sent() - s0) / (time.perf_counter() - t0)
                page_decoder = page.evaluate("document.getElementById('source').dataset.decoder")
                for _ in range(args.taps):
                    page.wait_for_timeout(300)
                    seen = page.evaluate(PAGE_TAP, {"url": base + "/act", "tap": tap})
                    assert seen is not None, "the page's view never changed after a tap"
                    page_visible.append(seen["visible"] / 1000)
                    page_acts.append(seen["act"] / 1000)
                    client.post(base + "/act", json={"type": "key", "key": "back"})
                client.post(base + "/release", json={})
                browser.close()
    return {
        "machine": machine(),
        "live_view_source": source,
        "live_view_width_px": WIDTH,
        "frames_per_s": round(fps, 1),
        "frame_kib_median": round(statistics.median(sizes) / 1024, 1),
        "tap_to_visible_ms_p50": round(1000 * pct(latencies, 0.5)),
        "tap_to_visible_ms_p95": round(1000 * pct(latencies, 0.95)),
        "act_request_ms_p50": round(1000 * pct(acts, 0.5)),
        "act_parts_ms_p50": {
            k: round(statistics.median(float(p[k]) for p in parts if k in p), 1)
            for k in ("guard", "send", "settle")
            if any(k in p for p in parts)
        },
        "act_dumps_median": statistics.median(int(p["dumps"]) for p in parts)
        if parts and "dumps" in parts[0]
        else None,
        "act_input_path": sorted({str(p.get("path")) for p in parts}),
        "dump_ms_p50": round(1000 * statistics.median(dumps), 1),
        "taps_seen": f"{len(latencies)}/{args.taps}",
        "inputs_over_scrcpy": inputs_over_scrcpy,
        "page_frames_per_s_scrolling": None if page_fps is None else round(page_fps, 1),
        "page_decoder": page_decoder,
        "phone_sent_frames_per_s_scrolling": None if phone_fps is None else round(phone_fps, 1),
        "page_tap_to_visible_ms_p50": round(1000 * pct(page_visible, 0.5)) if page_visible else None,
        "page_tap_to_visible_ms_p95": round(1000 * pct(page_visible, 0.95)) if page_visible else None,
        "page_act_request_ms_p50": round(1000 * pct(page_acts, 0.5)) if page_acts else None,
        "scrcpy_decoded_frames_per_s_720x1600_still": None if video_fps is None else round(video_fps, 1),
        "scrcpy_decoded_frames_per_s_720x1600_scrolling": None
        if video_fps_scrolling is None
        else round(video_fps_scrolling, 1),
    }


if __name__ == "__main__":
    main()
