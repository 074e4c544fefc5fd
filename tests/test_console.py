"""The lab console: selectors, access rules, labelling, and (farm tier) the JSON API on virtual
phones behind the real adb server; the browser tier drives the pages in Chromium."""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from PIL import Image, ImageChops

from realbench.console.episodes import Stores
from realbench.console.labels import LabelQueue, read_plan
from realbench.console.security import console_guard, require_token
from realbench.console.selectors import SelectorKind, choose_selector, node_at
from realbench.errors import ConfigError
from realbench.hierarchy import Hierarchy, Selector
from tests.analysis_fixtures import write_store
from tests.console_support import CHROMIUM, CHROMIUM_ARGS, RunningConsole, console_pack, running_console
from tests.farm_support import BANK, TICKET

ROOT = Path(__file__).resolve().parents[1]

SCREEN = """<hierarchy rotation="0">
<node class="android.widget.FrameLayout" bounds="[0,0][1080,2400]" text="" resource-id="" content-desc="">
 <node class="android.widget.Button" resource-id="app:id/ok" text="确定" bounds="[0,0][500,100]" clickable="true"/>
 <node class="android.widget.LinearLayout" resource-id="app:id/row" bounds="[0,200][1080,300]" clickable="true">
  <node class="android.widget.TextView" text="北京" bounds="[20,210][300,290]"/>
 </node>
 <node class="android.widget.LinearLayout" resource-id="app:id/row" bounds="[0,300][1080,400]" clickable="true">
  <node class="android.widget.TextView" text="北京" bounds="[20,310][300,390]"/>
  <node class="android.widget.ImageView" content-desc="删除" bounds="[900,310][1000,390]"/>
 </node>
 <node class="android.view.View" bounds="[0,500][1080,600]"/>
 <node class="android.view.View" bounds="[0,600][1080,700]"/>
</node></hierarchy>"""


# --- selectors (no phone) ------------------------------------------------------------------------


def test_selector_prefers_unique_id_then_text_then_desc_then_position() -> None:
    tree = Hierarchy(SCREEN)
    ok = choose_selector(tree, node_at(tree, 100, 50))  # type: ignore[arg-type]
    assert ok.kind is SelectorKind.RESOURCE_ID and ok.unique and ok.selector.resource_id == "ok"
    desc = choose_selector(tree, node_at(tree, 950, 350))  # type: ignore[arg-type]
    assert desc.kind is SelectorKind.CONTENT_DESC and desc.selector.content_desc == "删除"
    second = node_at(tree, 100, 350)
    assert second is not None and second.text == "北京"
    rel = choose_selector(tree, second)
    assert rel.kind is SelectorKind.RELATIVE and not rel.unique and rel.matches == 2
    assert tree.find_one(rel.selector) is second  # nth picks the very node
    blank = choose_selector(tree, node_at(tree, 500, 650))  # type: ignore[arg-type]
    assert blank.kind is SelectorKind.RELATIVE and blank.selector.nth == 1


# --- access rules (no phone) -----------------------------------------------------------------------


def test_non_loopback_bind_needs_a_token() -> None:
    with pytest.raises(ConfigError, match="without a token"):
        require_token("0.0.0.0", None, {})
    with pytest.raises(ConfigError, match="not set"):
        require_token("0.0.0.0", "RB_TOKEN", {})
    assert require_token("127.0.0.1", None, {}) is None
    assert require_token("0.0.0.0", "RB_TOKEN", {"RB_TOKEN": "x" * 32}) == "x" * 32


def test_console_command_refuses_a_public_bind_without_token(tmp_path: Path) -> None:
    store = write_store(tmp_path / "s", env="real", n_tasks=1, repeats=1)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RB_CONSOLE_TOKEN", None)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "realbench",
            "console",
            "--store",
            str(store),
            "--host",
            "0.0.0.0",
            "--port",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert out.returncode == 2, out.stderr
    assert "without a token" in out.stderr


async def _ok(scope, receive, send) -> None:  # noqa: ANN001 - a bare ASGI app
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def test_guard_refuses_socket_handshakes_before_the_app_sees_them() -> None:
    """A browser opens a WebSocket to any site without asking; the console has no socket routes, so
    a handshake must never reach the app, even from its own origin with its token."""
    import anyio

    reached: list[str] = []

    async def app(scope, receive, send) -> None:  # noqa: ANN001 - a bare ASGI app
        reached.append(scope["type"])
        if scope["type"] == "websocket":
            await send({"type": "websocket.accept"})

    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    async def receive() -> dict:
        return {"type": "websocket.connect"}

    token = "t" * 24
    scopes = [
        [(b"host", b"127.0.0.1:8700"), (b"origin", b"http://evil.example")],
        [
            (b"host", b"127.0.0.1:8700"),
            (b"origin", b"http://127.0.0.1:8700"),
            (b"cookie", f"realbench_console={token}".encode()),
        ],
    ]
    for headers in scopes:
        scope = {
            "type": "websocket",
            "scheme": "ws",
            "path": "/api/phones",
            "headers": headers,
            "query_string": b"",
        }
        anyio.run(app, scope, receive, send)  # unguarded: the handshake is accepted
        assert reached.pop() == "websocket" and sent.pop()["type"] == "websocket.accept"
        for t in (None, token):
            anyio.run(console_guard(app, token=t, loopback=True), scope, receive, send)
    assert reached == []
    assert [m["type"] for m in sent] == ["websocket.close"] * 4


def test_guard_token_origin_content_type_and_host() -> None:
    import anyio

    async def run() -> None:
        token = "t" * 24
        bare = httpx.AsyncClient(transport=httpx.ASGITransport(app=_ok), base_url="http://10.0.0.5:8700")
        guard = console_guard(_ok, token=token, loopback=False)
        async with (
            bare,
            httpx.AsyncClient(transport=httpx.ASGITransport(app=guard), base_url="http://10.0.0.5:8700") as c,
        ):
            auth = {"Authorization": f"Bearer {token}"}
            attacks: list[tuple[str, str, dict[str, str | bytes], bytes, int]] = [
                ("GET", "/api/phones", {}, b"", 401),
                ("GET", "/api/phones", {"Authorization": "Bearer wrong"}, b"", 401),
                ("GET", "/api/phones", {"X-Realbench-Token": "wrong"}, b"", 401),
                (
                    "GET",
                    "/api/phones",
                    {"Authorization": "Bearer t\xe9".encode("latin-1") + b"t" * 22},
                    b"",
                    401,
                ),  # not ASCII
                ("HEAD", "/fleet?token=" + "u" * 24, {}, b"", 401),
                # a form post: no JSON, no preflight in a browser
                ("POST", "/api/label", auth, b"success=1", 415),
                ("POST", "/api/release", auth, b"", 415),
                (
                    "POST",
                    "/api/label",
                    {**auth, "Content-Type": "application/json", "Origin": "http://evil.example"},
                    b"{}",
                    403,
                ),
                (
                    "POST",
                    "/api/label",
                    {**auth, "Content-Type": "application/json", "Origin": "https://10.0.0.5:8700"},
                    b"{}",
                    403,
                ),
                ("POST", "/api/label?token=" + token, {"Content-Type": "application/json"}, b"{}", 401),
                ("PUT", "/api/label", {**auth, "Content-Type": "application/json"}, b"{}", 405),
                ("DELETE", "/api/label", auth, b"", 405),
                ("GET", "/api/phones", {**auth, "Sec-Fetch-Site": "cross-site"}, b"", 403),
                ("GET", "/api/phones/x/video", {**auth, "Sec-Fetch-Site": "same-site"}, b"", 403),
                (
                    "POST",
                    "/label",
                    {**auth, "Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"},
                    b"{}",
                    403,
                ),
            ]
            for method, path, headers, body, status in attacks:
                assert (await bare.request(method, path, headers=headers, content=body)).status_code == 200
                r = await c.request(method, path, headers=headers, content=body)
                assert r.status_code == status, (method, path, headers, r.status_code)
            assert (await c.get("/api/phones", headers=auth)).status_code == 200
            assert (await c.get("/api/phones", headers={"X-Realbench-Token": token})).status_code == 200
            r = await c.get(f"/fleet?store=1&token={token}&x=%20")
            assert r.status_code == 303 and "HttpOnly" in r.headers["set-cookie"]
            assert r.headers["location"] == "/fleet?store=1&x=+"  # the token leaves the address bar
            cookie = {"Cookie": f"realbench_console={token}"}
            assert (await c.get("/fleet", headers=cookie)).status_code == 200
            good = {**auth, "Content-Type": "application/json", "Origin": "http://10.0.0.5:8700"}
            assert (await c.post("/api/label", headers=good, content=b"{}")).status_code == 200
            # a link from another site opens a page (not the API)
            assert (await c.get("/runs", headers={**auth, "Sec-Fetch-Site": "cross-site"})).status_code == 200
        local = console_guard(_ok, token=None, loopback=True)
        for host, status in (("rebound.example:8700", 403), ("127.0.0.1:8700", 200), ("[::1]:8700", 200)):
            async with httpx.AsyncClient(
                transport=httpx.ASGITransport(app=local), base_url=f"http://{host}"
            ) as c:
                assert (await c.get("/api/phones")).status_code == status, host  # DNS rebinding

    anyio.run(run)


def test_a_console_off_loopback_never_runs_without_a_token() -> None:
    from realbench.console.security import console_security

    with pytest.raises(ConfigError, match="needs a token"):
        console_guard(_ok, token=None, loopback=False)
    assert console_security("k" * 16, loopback=False).allowed_hosts is None
    # bound to another loopback address, the console answers to it as well (and only on loopback)
    assert "127.0.0.2" in (console_security(None, loopback=True, host="127.0.0.2").allowed_hosts or ())
    assert "10.0.0.5" not in (console_security(None, loopback=True, host="10.0.0.5").allowed_hosts or ())


# --- labelling (no phone) ----------------------------------------------------------------------------


def _audit(store: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "realbench", "audit", str(store), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_label_queue_is_blind_serves_the_plan_first_and_writes_human_verdicts(tmp_path: Path) -> None:
    store = write_store(tmp_path / "s", env="real", n_tasks=3, repeats=2)
    stores = Stores([store])
    try:
        queue = LabelQueue(stores)
        first = queue.queue("0", "ann")
        assert len(first) == 12  # 2 models x 3 tasks x 2 repeats, all judged
        planned, second = first[5][0], first[7][0]
        bare = tmp_path / "bare.json"
        bare.write_text(json.dumps({"episodes": [planned]}))
        assert read_plan(bare) == [(planned, None)]
        # the plan `realbench audit --plan-labels N` writes (here into another folder): served in order
        other = tmp_path / "elsewhere"
        other.mkdir()
        (other / "label-plan.json").write_text(
            json.dumps(
                {
                    "kind": "realbench-label-plan",
                    "episodes": [
                        {"order": 2, "episode": second, "store": str(store), "task": "t"},
                        {"order": 1, "episode": planned, "store": str(store), "task": "t"},
                        {"order": 3, "episode": first[9][0], "store": str(other), "task": "t"},
                    ],
                }
            )
        )
        queue = LabelQueue(stores, plans=[other / "label-plan.json"])
        assert [e for e, p in queue.queue("0", "ann") if p] == [planned, second]
        item = queue.next("0", "ann")
        assert item is not None and item["episode"] == planned and item["planned"]
        assert "judge" not in json.dumps(item) and "verdict" not in item  # blind
        assert item["steps"] and item["steps"][0]["image"].startswith("data:image/jpeg")
        reveal = queue.save("0", planned, "ann", True, "looks done")
        assert reveal["judge"] and reveal["judge"][0]["name"] == "vlm-judge"
        queue.save("0", planned, "bob", None, "cannot tell")
        assert planned not in [e for e, _ in queue.queue("0", "ann")]
        verdicts = stores.get("0").verdicts(planned)
        human = {v.name: v for v in verdicts if str(v.source) == "human"}
        assert human["ann"].success and not human["ann"].abstained and human["ann"].reason == "looks done"
        assert human["bob"].abstained
        for e, _ in first[:4]:
            queue.save("0", e, "ann", True)
            queue.save("0", e, "bob", e != first[0][0])
        pair = queue.agreement("0")["pairs"][0]
        assert (pair["a"], pair["b"], pair["n"], pair["agree"]) == ("ann", "bob", 4, 3)
    finally:
        stores.close()


# --- farm: the JSON API on virtual phones --------------------------------------------------------------

farm = pytest.mark.skipif(shutil.which("adb") is None, reason="needs Debian's adb")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningConsole]:
    with running_console(tmp_path_factory.mktemp("console")) as c:
        yield c


def _post(c: RunningConsole, path: str, body: dict) -> httpx.Response:
    return httpx.post(c.url + path, json=body, timeout=60)


def _jpeg(data: bytes) -> Image.Image:
    return Image.open(io.BytesIO(data)).convert("RGB")


@farm
@pytest.mark.farm
def test_api_lists_phones_streams_screens_and_acts(live: RunningConsole) -> None:
    phones = httpx.get(live.url + "/api/phones", timeout=120).json()
    assert [p["serial"] for p in phones] == live.serials
    p0 = phones[0]
    assert p0["health"].startswith("ok") and p0["leased_by"] is None and p0["label"] == "bench-0"
    assert set(p0["apps"]) == {TICKET, BANK} and p0["apps"][TICKET]["version"]
    serial = live.serials[0]
    assert _post(live, f"/api/phones/{serial}/start", {"package": TICKET}).status_code == 200
    before = httpx.get(f"{live.url}/api/phones/{serial}/screen?width=540", timeout=30)
    assert before.headers["content-type"] == "image/jpeg" and _jpeg(before.content).width == 540
    xml = httpx.get(f"{live.url}/api/phones/{serial}/hierarchy", timeout=30).text
    button = Hierarchy(xml).find_one(Selector(text="车票预订"))
    assert button is not None
    cx, cy = button.bounds.center
    r = _post(
        live,
        f"/api/phones/{serial}/act",
        {"type": "click", "x": round(cx * 1000 / 1079), "y": round(cy * 1000 / 2399)},
    )
    assert r.status_code == 200, r.text
    after = httpx.get(f"{live.url}/api/phones/{serial}/screen?width=540", timeout=30)
    assert after.content != before.content
    vphone = live.host.phone(serial)
    assert any(e.kind == "tap" for e in vphone.events.events())  # over scrcpy or uiautomator
    # the console holds the phone through the pool: a run cannot lease it now
    assert httpx.get(live.url + "/api/phones?check=0", timeout=30).json()[0]["leased_by"] == "console"
    from devices.farm.pool import LeaseTimeout, PhonePool

    other = PhonePool(
        live.pool.rig, [live.pool.record(serial).spec], virtual=True, lease_dir=live.pool._lease_dir
    )
    with pytest.raises(LeaseTimeout):
        other.acquire(serial, timeout=0.3)
    assert _post(live, f"/api/phones/{serial}/release", {}).status_code == 200
    # and while a run holds it, the operator's input is refused and never reaches the phone
    held = other.acquire(serial, timeout=2)
    sent = len(vphone.events.events())
    busy = _post(live, f"/api/phones/{serial}/act", {"type": "key", "key": "back"})
    assert busy.status_code == 423 and "leased" in busy.json()["error"]
    assert len(vphone.events.events()) == sent
    held.release()
    bad = _post(live, f"/api/phones/{serial}/act", {"type": "click", "x": 5000, "y": 1})
    assert bad.status_code == 400 and "x" in bad.json()["error"]
    other_app = _post(live, f"/api/phones/{serial}/act", {"type": "open_app", "app": "com.android.settings"})
    assert other_app.status_code == 400 and "not an app of rig" in other_app.json()["error"]


@farm
@pytest.mark.farm
def test_boundary_tap_is_blocked_until_confirmed_and_logged(live: RunningConsole) -> None:
    serial = live.serials[1]
    vphone = live.host.phone(serial)
    assert _post(live, f"/api/phones/{serial}/start", {"package": BANK}).status_code == 200
    screen = vphone.ui.source(BANK)
    # 提交订单 on the commit test screen: always forbidden by the ticket pack
    tap = {"type": "click", "x": 500, "y": round(980 * 1000 / 2399)}
    r = _post(live, f"/api/phones/{serial}/act", tap)
    assert r.status_code == 409 and "提交订单" in r.json()["boundary"]
    assert not screen.taps  # the phone's own record: nothing arrived
    wrong = _post(
        live, f"/api/phones/{serial}/act", {"action": tap, "confirm": "something else", "operator": "tester"}
    )
    assert wrong.status_code == 409 and not screen.taps
    # the right control, but nobody named: refused (there is no default operator)
    nameless = _post(live, f"/api/phones/{serial}/act", {"action": tap, "confirm": r.json()["boundary"]})
    assert nameless.status_code == 400 and "operator" in nameless.json()["error"] and not screen.taps
    ok = _post(
        live,
        f"/api/phones/{serial}/act",
        {"action": tap, "confirm": r.json()["boundary"], "operator": "tester"},
    )
    assert ok.status_code == 200 and len(screen.taps) == 1
    log = [json.loads(line) for line in (live.data / "confirmations.jsonl").read_text().splitlines()]
    assert (
        log[-1]["serial"] == serial and log[-1]["operator"] == "tester" and "提交订单" in log[-1]["boundary"]
    )
    assert "付款确认" in log[-1]["screen"]  # the screen it was sent on, by its texts
    _post(live, f"/api/phones/{serial}/release", {})


@farm
@pytest.mark.farm
def test_capture_writes_screen_hierarchy_and_facts(live: RunningConsole, tmp_path: Path) -> None:
    serial = live.serials[0]
    _post(live, f"/api/phones/{serial}/start", {"package": TICKET})
    r = _post(live, f"/api/phones/{serial}/capture", {"label": "train_ticketing/home"})
    assert r.status_code == 200, r.text
    folder = Path(r.json()["path"])
    meta = json.loads((folder / "capture.json").read_text())
    assert meta["package"] == TICKET and meta["activity"] and meta["app_version"] == "5.8.0.8"
    assert meta["label"] == "train_ticketing/home" and meta["profile"]["name"] == "generic-1080x2400"
    assert _jpeg((folder / "screen.jpg").read_bytes()).size == (1080, 2400)
    assert "<hierarchy" in (folder / "hierarchy.xml").read_text()
    _post(live, f"/api/phones/{serial}/release", {})


# --- browser: the pages in Chromium ----------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.fail("Debian chromium is not installed at /usr/bin/chromium")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


def _page(browser: object):  # noqa: ANN202 - playwright Page
    page = browser.new_page(viewport={"width": 1280, "height": 1000})  # type: ignore[attr-defined]
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.errors = errors
    return page


def _frame_image(page) -> Image.Image:  # noqa: ANN001
    """The live image as the page shows it (the decoded video's canvas, else the JPEG stream's
    image, drawn to a canvas), so a change is what a person sees."""
    handle = page.wait_for_function(
        """() => { const video = document.getElementById('screen-video');
        if (!video.hidden) return video.toDataURL('image/png');
        const img = document.getElementById('screen-jpeg');
        if (!img.complete || !img.naturalWidth) return null;
        const c = document.createElement('canvas');
        c.width = img.naturalWidth; c.height = img.naturalHeight; c.getContext('2d').drawImage(img, 0, 0);
        return c.toDataURL('image/png'); }""",
        timeout=30_000,
    )
    url = handle.json_value()
    return Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))).convert("L")


def _changed_below_status_bar(a: Image.Image, b: Image.Image) -> float:
    """Share of pixels that changed noticeably, ignoring the status bar (its clock ticks)."""
    top = round(a.height * 0.05)
    diff = ImageChops.difference(a.crop((0, top, a.width, a.height)), b.crop((0, top, b.width, b.height)))
    hist = diff.histogram()
    return sum(hist[10:]) / max(1, sum(hist))


def _point_on_image(page, px: int, py: int) -> tuple[float, float]:  # noqa: ANN001
    box = page.locator("#screen").bounding_box()
    return box["x"] + px / 1080 * box["width"], box["y"] + py / 2400 * box["height"]


@farm
@pytest.mark.farm
@pytest.mark.browser
def test_fleet_page_lists_every_phone(live: RunningConsole, browser: object) -> None:
    page = _page(browser)
    page.goto(live.url + "/fleet")
    for serial in live.serials:
        page.wait_for_selector(f'#fleet tr[data-serial="{serial}"]', timeout=60_000)
    row = page.locator(f'#fleet tr[data-serial="{live.serials[0]}"]').inner_text()
    assert "bench-0" in row and "virtual-phone" in row and "5.8.0.8" in row
    assert not page.errors
    page.close()


@farm
@pytest.mark.farm
@pytest.mark.browser
def test_tap_through_the_page_changes_the_live_image_and_inspector_names_the_selector(
    live: RunningConsole, browser: object
) -> None:
    serial = live.serials[0]
    _post(live, f"/api/phones/{serial}/start", {"package": TICKET})
    _post(live, f"/api/phones/{serial}/act", {"type": "key", "key": "back"})
    _post(live, f"/api/phones/{serial}/start", {"package": TICKET})
    page = _page(browser)
    page.goto(f"{live.url}/phone/{serial}")
    page.wait_for_function("window.rbFrames >= 3", timeout=60_000)
    tree = Hierarchy(httpx.get(f"{live.url}/api/phones/{serial}/hierarchy", timeout=30).text)

    button = tree.find_one(Selector(text="车票预订"))
    assert button is not None
    x, y = _point_on_image(page, *button.bounds.center)
    page.mouse.move(x, y)
    page.wait_for_function(
        "document.getElementById('inspector').dataset.selector !== undefined", timeout=30_000
    )
    inspector = page.locator("#inspector")
    assert inspector.get_attribute("data-selector") == "Selector(resource_id='menu_0')"
    assert inspector.get_attribute("data-unique") == "true"
    assert "unique" in inspector.inner_text()
    before = _frame_image(page)
    clicks = len([e for e in live.host.phone(serial).events.events() if e.kind == "tap"])
    page.mouse.click(x, y)
    page.wait_for_function("document.getElementById('message').textContent === 'sent click'", timeout=30_000)
    deadline = time.monotonic() + 30
    while _changed_below_status_bar(before, _frame_image(page)) < 0.01:
        assert time.monotonic() < deadline, [
            (e.method, e.x, e.y) for e in live.host.phone(serial).events.events()
        ][-4:]
        page.wait_for_timeout(100)
    events = [e for e in live.host.phone(serial).events.events() if e.kind == "tap"]
    assert len(events) == clicks + 1, [(e.method, e.kind) for e in live.host.phone(serial).events.events()][
        -5:
    ]
    assert (
        abs(events[-1].x - button.bounds.center[0]) < 12 and abs(events[-1].y - button.bounds.center[1]) < 12
    )
    # a drag on the image is a swipe from where it started to where it ended
    page.mouse.move(x, y + 200)
    page.mouse.down()
    page.mouse.move(x, y + 100, steps=4)
    page.mouse.move(x, y, steps=4)
    page.mouse.up()
    page.wait_for_function("document.getElementById('message').textContent === 'sent swipe'", timeout=30_000)
    swipe = [e for e in live.host.phone(serial).events.events() if e.kind == "swipe"][-1]
    assert swipe.y is not None and swipe.y2 is not None and swipe.y - swipe.y2 > 300  # upward, in pixels
    assert not page.errors
    _post(live, f"/api/phones/{serial}/release", {})
    page.close()


@farm
@pytest.mark.farm
@pytest.mark.browser
def test_boundary_tap_in_the_page_waits_for_the_operator_to_confirm(
    live: RunningConsole, browser: object
) -> None:
    serial = live.serials[1]
    _post(live, f"/api/phones/{serial}/start", {"package": BANK})
    screen = live.host.phone(serial).ui.source(BANK)
    screen.taps.clear()
    page = _page(browser)
    page.goto(f"{live.url}/phone/{serial}")
    page.evaluate("localStorage.removeItem('rb-operator')")  # a new operator: no name yet
    page.reload()
    page.wait_for_function("window.rbFrames >= 1", timeout=60_000)
    x, y = _point_on_image(page, 540, 980)  # 提交订单
    dialog = page.locator("#confirm-dialog")

    def blocked_tap() -> None:
        page.mouse.click(x, y)
        dialog.wait_for(state="visible", timeout=30_000)
        assert "提交订单" in page.locator("#confirm-boundary").inner_text()

    def not_sent() -> None:
        page.wait_for_function("document.getElementById('message').textContent.startsWith('not sent')")
        page.evaluate("document.getElementById('message').textContent = ''")
        assert not screen.taps

    blocked_tap()
    assert not screen.taps
    # the dialog opens on Cancel, and Send is off until the operator names themselves
    assert page.evaluate("document.activeElement.id") == "confirm-cancel"
    assert page.locator("#confirm-send").is_disabled()
    page.keyboard.press("Enter")  # what a new operator does first
    dialog.wait_for(state="hidden")
    not_sent()
    blocked_tap()
    page.click("#confirm-cancel")
    not_sent()
    # named, with the focus on Send: Enter still does not send
    blocked_tap()
    page.fill("#confirm-operator", "tester")
    assert page.locator("#confirm-send").is_enabled()
    page.focus("#confirm-send")
    page.keyboard.press("Enter")
    dialog.wait_for(state="hidden")
    not_sent()
    # only a click on Send, with a name, sends it, and the override is logged under that name
    blocked_tap()
    page.fill("#confirm-operator", "tester")
    page.click("#confirm-send")
    page.wait_for_function(
        "document.getElementById('message').textContent.startsWith('sent')", timeout=30_000
    )
    assert len(screen.taps) == 1
    entry = json.loads((live.data / "confirmations.jsonl").read_text().splitlines()[-1])
    assert entry["operator"] == "tester" and "提交订单" in entry["boundary"] and entry["screen"]
    assert not page.errors
    _post(live, f"/api/phones/{serial}/release", {})
    page.close()


@farm
@pytest.mark.farm
@pytest.mark.browser
def test_three_labels_through_the_page_become_human_verdicts_and_change_the_audit(
    live: RunningConsole, browser: object
) -> None:
    before = _audit(live.store)
    page = _page(browser)
    page.goto(f"{live.url}/label?store=0&labeller=ann")
    seen = []
    for key in ("s", "f", "u", "s"):
        page.wait_for_selector("#label-item:not([hidden])", timeout=30_000)
        page.wait_for_function("document.querySelector('#label-success').disabled === false")
        meta = page.locator("#label-meta").inner_text()
        assert "judge" not in page.locator("#label-item").inner_text().lower().replace("judge said", "")
        seen.append(meta)
        page.keyboard.press(key)
        page.wait_for_selector("#label-reveal:not([hidden])")
        assert "Judge said" in page.locator("#label-reveal").inner_text()
        page.keyboard.press("n")
    assert len(set(seen)) == 4
    from realbench.store import RunStore

    with RunStore(live.store, create=False) as store:
        frame = store.verdicts_frame()
    human = frame[(frame["source"] == "human") & (frame["name"] == "ann")]
    assert len(human) == 4 and int(human["abstained"].sum()) == 1
    assert sorted(human.loc[~human["abstained"], "success"].tolist()) == [False, True, True]
    after = _audit(live.store)
    assert not before["judges"] and after["judges"]["vlm-judge"]["n_labelled"] == 3
    assert not page.errors
    page.close()


@farm
@pytest.mark.farm
def test_runs_pages_summarise_filter_and_replay_both_sides(live: RunningConsole) -> None:
    runs = httpx.get(live.url + "/runs", timeout=60)
    assert runs.status_code == 200
    assert "synthetic:trained@clone" in runs.text and "synthetic:trained@real" in runs.text
    table = httpx.get(live.url + "/runs/1?outcome=boundary_reached", timeout=60).text
    assert "12 episode attempts" in table and "<td>clone</td>" not in table.split('class="data tasks"')[1]
    only_clone = httpx.get(live.url + "/runs/1?target=clone&outcome=success", timeout=60).text
    assert "boundary_reached" not in only_clone.split('class="data tasks"')[1]
    tasks = only_clone.split('class="data tasks"')[1].split("</table>")[0]
    assert tasks.count("<tr>") > 1 and tasks.count("<td>clone</td>") == tasks.count("<tr>") - 1
    episode_id = "synthetic:trained@real/task1/s0/r0/a0"
    page = httpx.get(live.url + "/runs/1/episode", params={"id": episode_id}, timeout=60).text
    sides = page.split('class="side"')
    assert len(sides) == 3
    assert "clone: clone" in sides[1] and "synthetic:trained@clone/task1/s0/r0/a0" in sides[1]
    assert "phone: real" in sides[2] and "virtual phone" in sides[2]
    assert sides[1].count("data:image/jpeg") == 3 and sides[2].count("data:image/jpeg") == 3
    assert "vlm-judge" in page  # the runs view is not blind


@farm
@pytest.mark.farm
def test_capture_command_writes_a_capture(live: RunningConsole, tmp_path: Path) -> None:
    serial = live.serials[0]
    rig = tmp_path / "rig.yaml"
    rig.write_text(
        json.dumps(
            {
                "name": "bench",
                "phones": [{"serial": serial, "profile": "generic-1080x2400", "virtual": True}],
                "apps": [{"package": TICKET, "version": "5.8.0.8"}],
            }
        )
    )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "realbench",
            "capture",
            "--rig",
            str(rig),
            "--serial",
            serial,
            "--label",
            "home",
            "--out",
            str(tmp_path / "caps"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stderr
    folders = list((tmp_path / "caps").iterdir())
    assert len(folders) == 1 and folders[0].name.endswith("-home")
    meta = json.loads((folders[0] / "capture.json").read_text())
    assert meta["serial"] == serial and meta["label"] == "home" and meta["time"] > 0


# --- recorder (no phone): steps to recipe, marks, writing -------------------------------------------


def test_recorder_turns_marked_steps_into_a_recipe_and_patches_the_pack_with_a_backup(tmp_path: Path) -> None:
    import yaml

    from realbench.console.recorder import Phase, RecordedStep, Recorder, Recording, StepKind
    from realbench.taskpack import load_pack

    pack = tmp_path / "train_ticketing"
    shutil.copytree(ROOT / "taskpacks" / "train_ticketing", pack)
    rec = Recorder.__new__(Recorder)  # the recipe logic needs no phone
    rec.data_dir, rec._recordings = tmp_path / "data", {}
    rec.packs = {pack.resolve(): load_pack(pack)}
    task = "lookup-passenger-count"
    steps = [
        RecordedStep(StepKind.LAUNCH, Phase.SETUP),
        RecordedStep(StepKind.POINT, Phase.CHECK, {"resource_id": "ticket_home_btn_search"}, "resource-id"),
        RecordedStep(StepKind.TAP, Phase.GOLDEN, {"text": "我的"}, "text"),
        RecordedStep(StepKind.TYPE, Phase.GOLDEN, {"resource_id": "search"}, text="北京"),
        RecordedStep(StepKind.SWIPE, Phase.GOLDEN, direction="up"),
        RecordedStep(StepKind.TAP, Phase.GOLDEN, {"text": "常用乘车人", "nth": 1}, "relative", unique=False),
        RecordedStep(StepKind.POINT, Phase.ANSWER, {"resource_id": "passenger_count"}, regex=r"(\d+)"),
    ]
    rec._recordings["s"] = Recording(pack=pack.resolve(), task=task, steps=steps)
    recipe, problems = rec.recipe("s")
    assert recipe["setup"] == [
        {"do": "launch", "expect": [{"selector": {"resource_id": "ticket_home_btn_search"}}]}
    ]
    assert recipe["golden"] == [
        {"tap": {"text": "我的"}},
        {"type": {"text": "北京", "into": {"resource_id": "search"}}},
        {"swipe": {"direction": "up"}},
        {"tap": {"text": "常用乘车人", "nth": 1}},
        {"answer": {"read": {"resource_id": "passenger_count"}, "regex": r"(\d+)"}},
    ]
    assert len(problems) == 1 and "not unique" in problems[0]
    with pytest.raises(ConfigError, match="problems"):
        rec.write("s")
    rec.mark("s", 5, None, delete=True)
    rec.mark("s", 4, Phase.SETUP)  # a swipe has no setup form
    assert any("no setup step form" in p for p in rec.recipe("s")[1])
    rec.mark("s", 4, Phase.GOLDEN)
    with pytest.raises(ConfigError):
        rec.mark("s", 1, Phase.GOLDEN)  # a pointed-at node is only a check or an answer
    with pytest.raises(ConfigError, match="relative"):
        rec.write("s", new_file=Path("/etc/x.yaml"))
    written = rec.write("s")
    assert written["backup"] and Path(written["backup"]).exists()
    header = (pack / "real.yaml").read_text(encoding="utf-8").splitlines()[0]
    assert header.startswith("#")  # the file's comment header survives the patch
    data = yaml.safe_load((pack / "real.yaml").read_text(encoding="utf-8"))["tasks"][task]
    assert data["golden"][0] == {"tap": {"text": "我的"}} and "unmatched" in data  # other keys kept
    loaded = next(t for t in load_pack(pack).tasks if t.id == task)
    assert len(loaded.real.golden) == 4 and loaded.real.setup[0].expect
    new = rec.write("s", new_file=Path("lookup.yaml"))
    assert Path(new["path"]) == tmp_path / "data" / "recipes" / "lookup.yaml"
    assert yaml.safe_load(Path(new["path"]).read_text(encoding="utf-8"))["tasks"][task]["golden"]


@farm
@pytest.mark.farm
def test_account_secrets_never_reach_a_page(
    live: RunningConsole, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from devices.farm.pool import PhonePool
    from devices.rig import PhoneSpec, parse_rig
    from realbench.console.command import console_app
    from realbench.console.server import serve_in_thread

    secret = "Zqx-secret-wxyz"  # no digits: PIN digits are refused on a screen with a password field
    monkeypatch.setenv("RB_TEST_BANK_PASSWORD", secret)
    rig = parse_rig(
        {
            "name": "secret-test",
            "phones": [{"serial": live.serials[1], "profile": "generic-1080x2400", "accounts": ["bank"]}],
            "apps": [{"package": BANK}],
            "accounts": [{"name": "bank", "app": BANK, "password_env": "RB_TEST_BANK_PASSWORD"}],
        }
    )
    pool = PhonePool(
        rig,
        [PhoneSpec(serial=live.serials[1], profile="generic-1080x2400")],
        virtual=True,
        lease_dir=tmp_path,
    )
    screen = live.host.phone(live.serials[1]).ui.source(BANK)
    try:
        with (
            console_app(
                rig=None,
                stores=[],
                data_dir=tmp_path / "d",
                pool=pool,
                packs=[console_pack(tmp_path / "pack")],
            ) as app,
            serve_in_thread(app) as url,
        ):
            serial = live.serials[1]
            assert (
                httpx.post(f"{url}/api/phones/{serial}/start", json={"package": BANK}, timeout=60).status_code
                == 200
            )
            # the amount field (not a password field) now shows the secret on the phone itself
            httpx.post(
                f"{url}/api/phones/{serial}/act", json={"type": "click", "x": 500, "y": 108}, timeout=60
            )
            assert (
                httpx.post(
                    f"{url}/api/phones/{serial}/act", json={"type": "type", "text": secret}, timeout=60
                ).status_code
                == 200
            )
            assert secret in screen.fields["amount"]
            xml = httpx.get(f"{url}/api/phones/{serial}/hierarchy", timeout=30).text
            inspected = httpx.get(f"{url}/api/phones/{serial}/inspect?x=500&y=108", timeout=30).text
            cap = httpx.post(f"{url}/api/phones/{serial}/capture", json={}, timeout=60).json()["path"]
            for text in (
                xml,
                inspected,
                (Path(cap) / "hierarchy.xml").read_text(),
                (Path(cap) / "capture.json").read_text(),
            ):
                assert secret not in text
            assert "••••••" in xml
            httpx.post(f"{url}/api/phones/{serial}/release", json={}, timeout=30)
    finally:
        screen.clear()
        pool.close()


@farm
@pytest.mark.farm
def test_fleet_shows_what_a_run_in_another_process_recorded(live: RunningConsole) -> None:
    serial = live.serials[1]
    live.pool._lease_dir.mkdir(parents=True, exist_ok=True)
    record = live.pool._lease_dir / (serial.replace(":", "_") + ".json")
    record.write_text(
        json.dumps(
            {
                "serial": serial,
                "episodes": 10,
                "flake_rate": 0.3,
                "quarantined": True,
                "quarantine_reason": "3 environment failures in a row",
                "pid": 1,
            }
        )
    )
    try:
        row = next(
            r for r in httpx.get(live.url + "/api/phones?check=0", timeout=60).json() if r["serial"] == serial
        )
        assert row["quarantined"] and row["episodes"] == 10 and row["flake_rate"] == 0.3
        assert "environment failures" in row["quarantine_reason"]
    finally:
        record.unlink()


@farm
@pytest.mark.farm
@pytest.mark.browser
def test_token_mode_in_the_browser(live: RunningConsole, browser: object, tmp_path: Path) -> None:
    from realbench.console.command import console_app
    from realbench.console.server import serve_in_thread

    token = "k" * 32
    with (
        console_app(rig=None, stores=[live.store], data_dir=tmp_path, token=token, loopback=False) as app,
        serve_in_thread(app) as url,
    ):
        page = _page(browser)
        r = page.goto(url + "/runs")
        assert r is not None and r.status == 401
        page.goto(f"{url}/runs?token={token}")
        assert page.url == url + "/runs" and token not in page.url
        assert "synthetic:base@real" in page.content()
        page.goto(f"{url}/label?store=0&labeller=zoe")  # the page's own API calls carry the cookie
        page.wait_for_selector("#label-item:not([hidden])", timeout=30_000)
        assert httpx.get(url + "/api/label/next?store=0&labeller=zoe", timeout=30).status_code == 401
        assert not page.errors
        page.close()
