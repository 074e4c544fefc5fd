"""`screenrecord` on the virtual phone through the real stack: Debian's adb server and adbutils'
recorder (a pushed `sh` script that backgrounds `screenrecord`, waits for a line on stdin, then
sends SIGINT), the MP4 pulled back off the phone and decoded frame by frame."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from devices.virtual import VirtualPhoneHost
from devices.virtual.phone import VirtualPhone

pytestmark = [pytest.mark.farm, pytest.mark.skipif(shutil.which("adb") is None, reason="needs Debian's adb")]
adbutils = pytest.importorskip("adbutils")
cv2 = pytest.importorskip("cv2")


@pytest.fixture(scope="module")
def phone(adb_server_port: int) -> Iterator[VirtualPhone]:
    with VirtualPhoneHost() as host:
        host.start(1, screens="static")
        host.adb_connect(adb_server_port)
        yield host.phones[0]


def frames_of(path: Path) -> list:
    capture = cv2.VideoCapture(str(path))
    frames = []
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        frames.append(frame)
    capture.release()
    return frames


def test_adbutils_records_what_the_screen_showed(phone: VirtualPhone, tmp_path: Path) -> None:
    dev = adbutils.adb.device(phone.serial)
    assert dev.shell2(["which", "screenrecord"]).returncode == 0
    out = tmp_path / "episode.mp4"
    dev.start_recording(str(out))
    time.sleep(1.2)
    # the screen changes while recording: an app comes to the front
    dev.shell(["monkey", "-p", "com.MobileTicket", "-c", "android.intent.category.LAUNCHER", "1"])
    time.sleep(1.2)
    dev.stop_recording()
    data = out.read_bytes()
    assert data[4:8] == b"ftyp", "not an MP4"
    frames = frames_of(out)
    # about 2 frames a second over ~2.4 s of wall time, at the phone's own size
    assert len(frames) >= 4, len(frames)
    assert frames[0].shape[:2] == (2400, 1080)
    # the first and last frames differ: the launch is in the video
    assert float(abs(frames[0].astype(int) - frames[-1].astype(int)).mean()) > 2.0
    # adbutils removed its file from the phone, and the recorder stopped with the script
    assert not any(p.endswith(".mp4") for p in phone.fs.listdir("/sdcard"))


def test_screenrecord_refuses_what_android_refuses(phone: VirtualPhone) -> None:
    dev = adbutils.adb.device(phone.serial)
    assert dev.shell2(["screenrecord", "--time-limit", "999", "/sdcard/x.mp4"]).returncode == 2
    assert dev.shell2(["screenrecord"]).returncode == 2
    assert dev.shell2(["which", "nosuchtool"]).returncode == 1
    # a foreground recording with a time limit ends by itself and leaves its file
    assert (
        dev.shell2(["screenrecord", "--time-limit", "1", "--size", "360x800", "/sdcard/t.mp4"]).returncode
        == 0
    )
    assert dev.sync.stat("/sdcard/t.mp4").size > 0
