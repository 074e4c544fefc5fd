"""Fidelity runs with captures from several sources: a virtual phone's capture is called one, one bad
capture is named and the rest still scored, and `capture` refuses a label whose route no clone has
(and, on a virtual rig with no phones up, says to run `vphone up`) before touching a phone.

The captures are written here as `realbench capture` writes them; the renderer is a labelled fake
that draws a fixed screen (the scores are not what these tests check)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest
from PIL import Image

from analysis.fidelity.captures import BadCapture, ScreenLabel, load_captures
from analysis.fidelity.measure import fidelity_run
from realbench.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
W, H = 108, 240
XML = (
    '<hierarchy rotation="0"><node bounds="[0,0][108,240]" package="com.MobileTicket">'
    '<node text="查询车票" class="android.widget.Button" clickable="true" bounds="[10,100][98,130]" '
    'package="com.MobileTicket" /></node></hierarchy>'
)


def _jpeg(colour: tuple[int, int, int]) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (W, H), colour).save(buf, format="JPEG")
    return buf.getvalue()


def write_capture(root: Path, name: str, label: str, *, virtual: bool, screenshot: bool = True) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    if screenshot:
        (folder / "screen.jpg").write_bytes(_jpeg((240, 240, 250)))
    (folder / "hierarchy.xml").write_text(XML, encoding="utf-8")
    meta = {
        "kind": "realbench-capture",
        "serial": "127.0.0.1:5555" if virtual else "R58M12345",
        "device": {"kind": "virtual-phone" if virtual else "phone", "virtual": virtual},
        "package": "com.MobileTicket",
        "label": label,
        "files": {"screenshot": "screen.jpg", "hierarchy": "hierarchy.xml"},
    }
    (folder / "capture.json").write_text(json.dumps(meta), encoding="utf-8")
    return folder


@dataclass(frozen=True)
class FakeScreen:
    screenshot: bytes
    hierarchy: str
    route: str


class FakeRenderer:
    """A fake clone renderer (test stand-in): knows the routes `home` and `mine` only."""

    routes = ("home", "mine")

    def render(self, label: ScreenLabel, width: int, height: int) -> FakeScreen:
        if label.route not in self.routes:
            raise ConfigError(f"clone train_ticketing has no route {label.route!r}")
        buf = io.BytesIO()
        Image.new("RGB", (width, height), (235, 240, 250)).save(buf, format="PNG")
        return FakeScreen(buf.getvalue(), XML, label.route)


class _Captions(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.in_caption = False
        self.captions: list[str] = []
        self.in_unscored = False
        self.unscored = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.in_caption = tag == "figcaption"
        if dict(attrs).get("id") == "unscored":
            self.in_unscored = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "figcaption":
            self.in_caption = False
        if tag == "div":
            self.in_unscored = False

    def handle_data(self, data: str) -> None:
        if self.in_caption:
            self.captions.append(data.strip())
        if self.in_unscored:
            self.unscored += data


def test_a_bad_capture_is_named_and_the_others_are_scored(tmp_path: Path) -> None:
    caps = tmp_path / "caps"
    write_capture(caps, "a-virtual-home", "train_ticketing/home", virtual=True)
    write_capture(caps, "b-phone-mine", "train_ticketing/mine", virtual=False)
    write_capture(caps, "c-nowhere", "train_ticketing/nowhere", virtual=False)
    write_capture(caps, "d-no-screenshot", "train_ticketing/home", virtual=False, screenshot=False)
    bad: list[BadCapture] = []
    loaded = load_captures(caps, bad)
    assert [c.name for c in loaded] == ["a-virtual-home", "b-phone-mine", "c-nowhere"]
    report = tmp_path / "fidelity.html"
    result = fidelity_run(
        loaded, FakeRenderer(), pack="train_ticketing", clone="train_ticketing", out=report, bad=bad
    )
    assert [s.capture for s in result.screens] == ["a-virtual-home", "b-phone-mine"]
    unscored = {u.capture: u.reason for u in result.unscored}
    assert set(unscored) == {"c-nowhere", "d-no-screenshot"}
    assert "nowhere" in unscored["c-nowhere"] and "screenshot" in unscored["d-no-screenshot"]
    page = _Captions()
    page.feed(report.read_text(encoding="utf-8"))
    # Each capture says where it came from; a virtual phone is never called real.
    assert page.captions.count("virtual phone (capture)") == 1
    assert page.captions.count("real phone (capture)") == 1
    assert "real (capture)" not in page.captions
    assert "c-nowhere" in page.unscored and "d-no-screenshot" in page.unscored
    assert [s.virtual for s in result.screens] == [True, False]


def test_when_no_capture_can_be_scored_the_run_fails_naming_them(tmp_path: Path) -> None:
    caps = tmp_path / "caps"
    write_capture(caps, "only", "train_ticketing/nowhere", virtual=True)
    with pytest.raises(ConfigError, match="only: .*nowhere"):
        fidelity_run(load_captures(caps, []), FakeRenderer(), pack="p", clone="train_ticketing", out=None)


def _realbench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "realbench", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_capture_refuses_a_route_no_clone_has_before_touching_a_phone(tmp_path: Path) -> None:
    out = tmp_path / "caps"
    res = _realbench(
        "capture",
        "--rig",
        "rigs/virtual.yaml",
        "--serial",
        "x",
        "--label",
        "train_ticketing/nowhere",
        "--out",
        str(out),
    )
    assert res.returncode == 2, res.stderr
    assert "'nowhere' is not a screen of clone 'train_ticketing'" in res.stderr
    assert not out.exists()


def test_capture_and_devices_on_a_virtual_rig_without_vphone_up_say_to_run_it(tmp_path: Path) -> None:
    from devices.farm.rig_targets import running_virtual_phones

    if running_virtual_phones():
        pytest.skip("`realbench vphone up` phones are running on this host")
    for args in (
        [
            "capture",
            "--rig",
            "rigs/virtual.yaml",
            "--serial",
            "x",
            "--label",
            "home",
            "--out",
            str(tmp_path / "c"),
        ],
        ["devices", "--rig", "rigs/virtual.yaml"],
    ):
        res = _realbench(*args)
        assert res.returncode == 2, res.stderr
        assert "realbench vphone up -n 2 --drift mild" in res.stderr
        assert "Traceback" not in res.stderr
