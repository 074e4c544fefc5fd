"""Screenshots of the real apps' interruptions as the clones show them under the `interruptions`
drift, and of 12306's interruptions that answer a step under the `flow` drift:
``python benchmarks/interruption_screenshots.py [OUT_DIR]`` (default docs/screenshots/interruptions).
One clone-server session per interruption, headless Chromium at 412x915 CSS px, scale 1; a flow
interruption's session is first walked to the step that brings it up, through the server's API."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx

import clones.registry  # noqa: F401  (registers the built-in clones)
from clones.base import get_clone
from clones.dom_plan import parse
from clones.flow_interruptions import TRAIN_TICKETING as FLOW
from clones.interruptions import CATALOGUE
from clones.server import CloneServer
from devices.clone_browser import BrowserPool, Emulation
from devices.clone_device import CloneDevice
from realbench.observation import ImageFormat

ROOT = Path(__file__).resolve().parents[1]


def _post(url: str, sid: str, ev: str, arg: str | None = None) -> None:
    httpx.post(f"{url}/api/sessions/{sid}/event", json={"ev": ev, "arg": arg}, timeout=30).raise_for_status()


def _book_from_list(url: str, sid: str, package: str) -> None:
    """Search, open the first train's seats and tap its first 预订, as a user does on the list."""
    _post(url, sid, "search_trains")
    for want in ("次列车", "预订"):
        html = httpx.get(f"{url}/s/{sid}/screen", timeout=30).json()["html"]
        node = next(d for d in parse(html, package) if want in d.node.text and "data-ev" in d.attrs)
        _post(url, sid, node.attrs["data-ev"], node.attrs.get("data-arg"))


def _flow_session(url: str, name: str, package: str) -> str:
    """A 12306 session with one flow interruption armed, walked to the step that brings it up."""
    item = next(i for i in FLOW if i.name == name)
    scenario = "fresh" if "book_seat" in item.events else "mid_booking"
    body = {"clone": "train_ticketing", "setup": {"data": {"scenario": scenario}}, "drift": {"flow": [name]}}
    sid = str(httpx.post(f"{url}/api/sessions", json=body, timeout=30).json()["session"])
    if scenario == "fresh":
        _book_from_list(url, sid, package)
    else:
        _post(url, sid, "submit_order")
    return sid


def _shoot(pool: BrowserPool, url: str, clone_name: str, session: str, path: Path) -> None:
    device = CloneDevice(
        pool, url, get_clone(clone_name), emulation=Emulation(scale=1.0), image_format=ImageFormat.PNG
    )
    try:
        device.open(session)
        path.write_bytes(device.observe().screenshot.data)
    finally:
        device.close()


def main(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    with CloneServer() as server, BrowserPool() as pool:
        for clone_name, items in CATALOGUE.items():
            for item in items:
                body = {"clone": clone_name, "drift": {"interruptions": [item.name]}}
                session = httpx.post(f"{server.url}/api/sessions", json=body, timeout=30).json()["session"]
                _shoot(pool, server.url, clone_name, session, out_dir / f"{item.name}.png")
                print(f"{item.name}: {item.evidence}")
        package = get_clone("train_ticketing").package
        for flow in FLOW:
            # the wait screen closes a few seconds after it is first drawn: shoot it at once
            session = _flow_session(server.url, flow.name, package)
            _shoot(pool, server.url, "train_ticketing", session, out_dir / f"{flow.name}.png")
            print(f"{flow.name}: {flow.evidence}")
    print(f"screenshots in {out_dir}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "screenshots" / "interruptions")
