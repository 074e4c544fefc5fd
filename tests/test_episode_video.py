"""`realbench run --video` on a virtual phone, end to end: the phone records its own frames when
adbutils asks through the real adb server, the MP4 is kept with the episode in the run store, and
the report's replay viewer plays it (checked in Chromium)."""

from __future__ import annotations

import base64
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devices.clone_browser import CHROMIUM_ARGS, DEFAULT_CHROMIUM
from devices.pack_run import run_pack
from devices.virtual import VirtualPhoneHost
from realbench.errors import ConfigError
from realbench.run_config import RunConfig
from realbench.store import VIDEO_FILE

pytestmark = [
    pytest.mark.farm,
    pytest.mark.browser,
    pytest.mark.skipif(shutil.which("adb") is None, reason="needs Debian's adb"),
    pytest.mark.skipif(not Path(DEFAULT_CHROMIUM).exists(), reason="clone screens need Debian's Chromium"),
]
cv2 = pytest.importorskip("cv2")

ROOT = Path(__file__).resolve().parents[1]
BANK_PACK = ROOT / "taskpacks" / "bank" / "pack.yaml"


@pytest.fixture(scope="module")
def clone_phone(adb_server_port: int) -> Iterator[tuple[VirtualPhoneHost, str]]:
    with VirtualPhoneHost() as host:
        (info,) = host.start(1, screens="clone", drift="none")
        host.adb_connect(adb_server_port)
        yield host, info.serial


def rig_file(tmp_path: Path, serial: str) -> Path:
    path = tmp_path / "rig.yaml"
    rig: dict[str, Any] = {
        "name": "video-phone",
        "phones": [{"serial": serial, "profile": "generic-1080x2400", "virtual": True}],
    }
    path.write_text(yaml.safe_dump(rig), encoding="utf-8")
    return path


def decoded_frames(path: Path) -> list[Any]:
    capture = cv2.VideoCapture(str(path))
    frames = []
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        frames.append(frame)
    capture.release()
    return frames


def test_video_is_kept_with_the_episode_and_played_in_the_replay(
    clone_phone: tuple[VirtualPhoneHost, str], tmp_path: Path
) -> None:
    host, serial = clone_phone
    out = tmp_path / "run"
    summary = run_pack(
        RunConfig(
            pack=BANK_PACK,
            out=out,
            target="clone-on-phone",
            agent="golden",
            tasks="transfer_saved_payee",
            rig=rig_file(tmp_path, serial),
            progress=False,
            video=True,
        )
    )
    assert summary["episodes"] >= 1, summary
    (episode_json,) = out.glob("episodes/*/*/episode.json")
    meta = json.loads(episode_json.read_text(encoding="utf-8"))
    assert meta["outcome"] == "success", meta
    assert meta["video"] == VIDEO_FILE
    video = episode_json.parent / VIDEO_FILE
    frames = decoded_frames(video)
    steps = [json.loads(line) for line in (episode_json.parent / "steps.jsonl").read_text().splitlines()]
    # the phone's own frames at its own size, a couple a second for the whole episode
    assert frames and frames[0].shape[:2] == (2400, 1080)
    assert len(frames) >= 2 * len(steps) // 2
    # the golden plan changed the screen: the video's first and last frames differ
    assert float(abs(frames[0].astype(int) - frames[-1].astype(int)).mean()) > 2.0
    # the recorder left nothing behind on the phone
    assert not [p for p in host.phone(serial).fs.listdir("/sdcard") if p.endswith(".mp4")]

    from analysis.report import build_report_from_stores

    report = build_report_from_stores([out], out=tmp_path / "report.html", resamples=200)
    html = report.read_text(encoding="utf-8")
    embedded = re.search(r'"video": "data:video/mp4;base64,([A-Za-z0-9+/=]+)"', html)
    assert embedded is not None, "the viewer does not carry the episode's video"
    assert base64.b64decode(embedded.group(1)) == video.read_bytes()

    from playwright import sync_api

    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=DEFAULT_CHROMIUM, headless=True, args=list(CHROMIUM_ARGS))
        try:
            page = browser.new_page()
            page.goto(report.resolve().as_uri())
            page.wait_for_selector("#viewer video", state="attached")
            shape = page.evaluate(
                """() => new Promise((resolve) => {
                    const v = document.querySelector('#viewer video');
                    const done = () => resolve([v.videoWidth, v.videoHeight, v.duration]);
                    if (v.readyState >= 1) done(); else v.addEventListener('loadedmetadata', done);
                    v.addEventListener('error', () => resolve(['error', v.error && v.error.code, 0]));
                })"""
            )
        finally:
            browser.close()
    assert shape[:2] == [1080, 2400], shape
    assert shape[2] > 0.5


def test_video_is_off_by_default_and_refused_where_it_cannot_record(tmp_path: Path) -> None:
    assert RunConfig(pack=BANK_PACK, out=tmp_path).video is False
    with pytest.raises(ConfigError, match="--video"):
        run_pack(
            RunConfig(pack=BANK_PACK, out=tmp_path / "clone", target="clone", video=True, progress=False)
        )
