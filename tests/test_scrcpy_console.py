"""The console's live view over scrcpy, and operator input over scrcpy's control socket, on a
virtual phone through Debian's adb server.

The bank package shows a commit test screen (devices.virtual.commit_screens) whose pay button
commits when tapped. The verdicts come from the virtual phone alone: the screen's own commit
records and the phone's input log (each event names its source, `scrcpy` for the control socket).
"""

from __future__ import annotations

import base64
import io
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from PIL import Image, ImageChops

from devices import scrcpy_protocol as proto
from devices.farm.pool import PhonePool
from devices.rig import PhoneSpec
from devices.virtual.model import InputSource
from devices.virtual.scrcpy_server import REPEAT_AFTER_US
from realbench.actions import Key, KeyPress, action_to_dict
from realbench.console.command import console_app
from realbench.console.server import serve_in_thread
from realbench.console.video_feed import STREAM_HEADER
from tests.console_support import CHROMIUM, CHROMIUM_ARGS, ConsoleBench, console_pack, console_rig
from tests.farm_support import virtual_phones
from tests.interlock_attacks import BANK, CANCEL, PAY, pay_screen, tap

pytestmark = [pytest.mark.farm, pytest.mark.skipif(shutil.which("adb") is None, reason="needs Debian's adb")]
pytest.importorskip("av")
adbutils = pytest.importorskip("adbutils")

from devices.scrcpy_client import ClientOptions, ScrcpyClient  # noqa: E402

Live = ConsoleBench


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    tmp = tmp_path_factory.mktemp("scrcpy-console")
    with virtual_phones(1) as (host, serials):
        spec = PhoneSpec(serial=serials[0], profile="generic-1080x2400", label="bench-0", virtual=True)
        pool = PhonePool(console_rig(), [spec], virtual=True, lease_dir=tmp / "leases")
        try:
            # A clip on the phone: scrcpy confirms input only by answering GET_CLIPBOARD, which it
            # does only while the clipboard holds text (else the console keeps uiautomator input).
            host.phone(serials[0]).ui.clipboard = "realbench test clip"
            with (
                console_app(
                    rig=None, stores=[], data_dir=tmp / "data", pool=pool, packs=[console_pack(tmp / "pack")]
                ) as app,
                serve_in_thread(app) as url,
            ):
                yield Live(url, host, serials[0], pool, tmp / "data", app)
        finally:
            pool.close()


def test_the_live_view_is_scrcpy_video(live: Live) -> None:
    r = live.screen()
    assert r.status_code == 200 and r.headers["content-type"] == "image/jpeg"
    assert r.headers["x-frame-source"] == "scrcpy", r.headers.get("x-frame-note")
    assert r.headers["x-frame-note"] == "live video (scrcpy)"
    assert live.vphone.scrcpy.sessions, "no scrcpy server runs on the phone"
    session = next(iter(live.vphone.scrcpy.sessions.values()))
    sent = session.frames_sent
    assert live.screen().headers["x-frame-source"] == "scrcpy"
    # frames keep coming from the phone's server: a still screen's last frame again every
    # REPEAT_AFTER_US, which two quick screen calls can both fall inside of
    deadline = time.monotonic() + 20 * REPEAT_AFTER_US / 1e6
    while session.frames_sent <= sent and time.monotonic() < deadline:
        time.sleep(0.01)
    assert session.frames_sent > sent


def test_a_control_socket_tap_on_a_commit_control_does_not_commit(live: Live) -> None:
    # the trap works: the same tap straight over a scrcpy control socket commits
    live.install(lambda: pay_screen("立即支付"))
    dev = adbutils.adb.device(live.serial)
    dev.shell(["am", "force-stop", BANK])
    dev.shell(["monkey", "-p", BANK, "1"])
    px, py = (PAY[0] + PAY[2]) // 2, (PAY[1] + PAY[3]) // 2
    with ScrcpyClient(dev, ClientOptions(max_size=1600)) as straight:
        straight.tap(*straight.to_video(px, py, (1080, 2400)))
        deadline = time.monotonic() + 10
        while not live.commits() and time.monotonic() < deadline:
            time.sleep(0.05)
    assert live.commits(), "the pay button did not commit over an unguarded control socket"

    # through the console (its input leaves over its own scrcpy session), nothing reaches the phone
    live.install(lambda: pay_screen("立即支付"))
    assert live.post("/start", {"package": BANK}).status_code == 200
    assert live.screen().headers["x-frame-source"] == "scrcpy"
    events = live.vphone.events
    before = len(events)
    r = live.post("/act", {"action": action_to_dict(tap(PAY))})
    assert r.status_code == 409, r.text
    assert not live.commits(), live.commits()
    assert len(events) == before, events.events(before)

    # what the guard allows does travel over the control socket: a tap on Cancel, and BACK
    assert live.post("/act", {"action": action_to_dict(tap(CANCEL))}).status_code == 200
    assert live.post("/act", {"action": action_to_dict(KeyPress(key=Key.BACK))}).status_code == 200
    sent = events.events(before)
    assert sent and all(e.source is InputSource.SCRCPY for e in sent), [(e.source, e.method) for e in sent]
    cx, cy = (CANCEL[0] + CANCEL[2]) // 2, (CANCEL[1] + CANCEL[3]) // 2
    assert any(e.kind == "tap" and abs(e.x - cx) < 12 and abs(e.y - cy) < 12 for e in sent), sent
    assert not live.commits()
    live.post("/release", {})


def test_the_screenshot_stream_is_the_fallback_and_says_why(
    live: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    from realbench.console.video import LiveVideo

    monkeypatch.setattr("devices.scrcpy_client.CONNECT_TIMEOUT_S", 1.5)
    # a console whose client asks for a server version the phone refuses
    video = LiveVideo(live.pool, ClientOptions(server_version="9.9"))
    try:
        assert video.frame(live.serial, 540, 70) is None
        status = video.status(live.serial)
        assert status.source == "screenshots" and "never answered" in status.note
        assert video.live(live.serial) is None
    finally:
        video.close()


def _browser(p: Any) -> Any:
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian chromium is not installed at /usr/bin/chromium")
    return p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)


def _grey(png: bytes, size: tuple[int, int] = (180, 400)) -> Image.Image:
    """Below the status bar (its clock ticks), small and grey: what a person would compare."""
    image = Image.open(io.BytesIO(png)).convert("L")
    top = round(image.height * 0.05)
    return image.crop((0, top, image.width, image.height)).resize(size, Image.Resampling.BILINEAR)


def _distance(a: Image.Image, b: Image.Image) -> float:
    """Mean absolute grey difference, 0–255."""
    hist = ImageChops.difference(a, b).histogram()
    return sum(i * n for i, n in enumerate(hist)) / max(1, sum(hist))


@pytest.mark.browser
def test_the_phone_page_decodes_scrcpy_video_and_shows_the_phones_screen(live: Live) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = _browser(p)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(f"{live.url}/phone/{live.serial}")
            page.wait_for_function("window.rbFrames >= 10", timeout=30_000)
            # decoded in the page (WebCodecs), not the console's JPEG stream
            assert page.locator("#source").get_attribute("data-decoder") == "webcodecs"
            assert page.locator("#source").inner_text() == "live video (scrcpy)"
            assert page.locator("#source").get_attribute("data-source") == "scrcpy"
            assert (
                page.locator("#screen-video").is_visible() and not page.locator("#screen-jpeg").is_visible()
            )
            size = page.evaluate(
                "[document.getElementById('screen-video').width, document.getElementById('screen-video').height]"
            )
            assert size == [720, 1600]
            # the canvas shows what the phone shows, read through another path (uiautomator's screenshot)
            shown = page.evaluate("document.getElementById('screen-video').toDataURL('image/png')")
            canvas = _grey(base64.b64decode(shown.split(",", 1)[1]))
            phone = _grey(live.pool.phone(live.serial).screenshot())
            assert _distance(canvas, phone) < 6, _distance(canvas, phone)
            # the comparison can fail: a blank view and the same screen upside down are far from it
            assert _distance(Image.new("L", phone.size, 0), phone) > 30
            assert _distance(phone.rotate(180), phone) > 6
            assert not errors
        finally:
            browser.close()


@pytest.mark.browser
def test_a_browser_without_webcodecs_gets_the_jpeg_stream_and_is_told_why(live: Live) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = _browser(p)
        try:
            page = browser.new_page()
            page.add_init_script("delete window.VideoDecoder; delete window.EncodedVideoChunk;")
            page.goto(f"{live.url}/phone/{live.serial}")
            page.wait_for_function("window.rbFrames >= 3", timeout=30_000)
            source = page.locator("#source")
            assert source.get_attribute("data-decoder") == "jpeg"
            assert (
                source.inner_text()
                == "live video (scrcpy) · JPEG frames: this browser has no WebCodecs decoder"
            )
            assert (
                page.locator("#screen-jpeg").is_visible() and not page.locator("#screen-video").is_visible()
            )
        finally:
            browser.close()


@pytest.mark.browser
def test_without_a_scrcpy_server_the_page_shows_screenshots_and_says_why(
    live: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    import realbench.console.video as video

    monkeypatch.setattr("devices.scrcpy_client.CONNECT_TIMEOUT_S", 1.5)
    # a console whose client asks for a server version the phone refuses: no server answers
    monkeypatch.setattr(video, "ClientOptions", lambda: ClientOptions(server_version="9.9"))
    with (
        console_app(rig=None, stores=[], data_dir=live.data / "refused", pool=live.pool) as app,
        serve_in_thread(app) as url,
    ):
        answer = httpx.get(f"{url}/api/phones/{live.serial}/video", timeout=60)
        assert answer.status_code == 503 and "never answered" in answer.json()["error"]
        with sync_api.sync_playwright() as p:
            browser = _browser(p)
            try:
                page = browser.new_page()
                page.goto(f"{url}/phone/{live.serial}")
                page.wait_for_function("window.rbFrames >= 3", timeout=30_000)
                source = page.locator("#source")
                assert source.get_attribute("data-source") == "screenshots"
                assert source.get_attribute("data-decoder") == "jpeg"
                assert source.inner_text().startswith("screenshot stream: scrcpy server on")
                assert "never answered" in source.inner_text()
            finally:
                browser.close()


def _video_head(url: str, **headers: str) -> tuple[int, bytes]:
    """The status and the first bytes of a video answer (the stream is then closed)."""
    with httpx.stream("GET", url, headers=headers, timeout=60) as r:
        if r.status_code != 200:
            r.read()
            return r.status_code, r.content
        head = b""
        for chunk in r.iter_bytes():
            head += chunk
            if len(head) >= STREAM_HEADER.size + proto.FRAME_HEADER.size:
                return 200, head
    return 200, head


def test_the_video_stream_follows_the_consoles_origin_and_token_rules(live: Live) -> None:
    video = f"{live.url}/api/phones/{live.serial}/video"
    # the stream itself: codec, size and catch-up, then the config packet first (a decoder needs it)
    status, head = _video_head(video)
    assert status == 200
    codec, width, height, catch_up = STREAM_HEADER.unpack(head[:16])
    assert (codec, width, height) == (proto.CODEC_H264, 720, 1600) and catch_up >= 1
    assert proto.FrameHeader.decode(head[16:28]).config
    # another local port's page, and a request the browser marks cross-site, get nothing
    port = int(live.url.rsplit(":", 1)[1])
    assert _video_head(video, origin=f"http://127.0.0.1:{port + 1}")[0] == 403
    assert _video_head(video, **{"sec-fetch-site": "cross-site"})[0] == 403
    assert _video_head(video, origin=f"http://127.0.0.1:{port}")[0] == 200
    # a console that needs a token: none, a wrong one → 401; the right one → the stream
    token = "t" * 24
    with (
        console_app(
            rig=None, stores=[], data_dir=live.data / "token", pool=live.pool, token=token, loopback=False
        ) as app,
        serve_in_thread(app) as url,
    ):
        guarded = f"{url}/api/phones/{live.serial}/video"
        assert _video_head(guarded)[0] == 401
        assert _video_head(guarded, authorization="Bearer " + "u" * 24)[0] == 401
        assert _video_head(guarded + "?token=" + "u" * 24)[0] == 401
        status, head = _video_head(guarded, authorization="Bearer " + token)
        assert status == 200 and STREAM_HEADER.unpack(head[:16])[0] == proto.CODEC_H264
