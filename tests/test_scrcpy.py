"""scrcpy end to end on a virtual phone through Debian's adb server: the server jar pushed (the
client's labelled stand-in: virtual phones serve scrcpy themselves), `app_process` launching the
server, its `localabstract` socket reached through `adb forward`, the device name, codec meta and
H.264 frames of the phone's own screen decoded with PyAV, and control-socket input landing in the
phone's own input log."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator

import numpy as np
import pytest

from devices import scrcpy_protocol as proto
from devices.virtual import VirtualPhoneHost
from devices.virtual.model import InputKind, InputSource
from devices.virtual.phone import VirtualPhone

pytestmark = [pytest.mark.farm, pytest.mark.skipif(shutil.which("adb") is None, reason="needs Debian's adb")]
adbutils = pytest.importorskip("adbutils")
pytest.importorskip("av")

from devices.scrcpy_client import ClientOptions, DecodedFrame, ScrcpyClient, ScrcpyUnavailable  # noqa: E402

TICKET = "com.MobileTicket"


@pytest.fixture(scope="module")
def phone(adb_server_port: int) -> Iterator[VirtualPhone]:
    with VirtualPhoneHost() as host:
        host.start(1, screens="static")
        host.adb_connect(adb_server_port)
        yield host.phones[0]


def _gray(image: object, size: tuple[int, int]) -> np.ndarray:
    return np.asarray(image.convert("L").resize(size), dtype=float)  # type: ignore[attr-defined]


def test_video_is_the_phones_own_screen_through_adb_forward(phone: VirtualPhone) -> None:
    dev = adbutils.adb.device(phone.serial)
    dev.shell(["monkey", "-p", TICKET, "1"])
    with ScrcpyClient(dev, ClientOptions(max_size=1600)) as client:
        assert client.device_name == phone.spec.identity.model
        assert (client.width, client.height) == (720, 1600)
        forwards = [f.remote for f in dev.forward_list() if f.serial == phone.serial]
        assert forwards == [f"localabstract:{proto.socket_name(client.scid)}"]
        assert phone.fs.get(proto.SERVER_PATH) is not None  # the pushed jar
        first = client.wait_frame(0, timeout=15)
        assert first is not None, client.error
        later = client.wait_frame(first.seq, timeout=5)
        assert later is not None and later.seq > first.seq  # a stream, not one picture
        seen = _gray(later.to_image(), (180, 400))
        truth = _gray(phone.ui.screenshot(), (180, 400))
        assert np.abs(seen - truth).mean() < 8, "the video is not the phone's screen"
        assert seen.mean() > 100  # the ticket app's light screen
        # the screen goes black on the phone: the video follows it
        phone.set_faults(black_screenshots=True)
        try:
            deadline = time.monotonic() + 10
            dark: DecodedFrame | None = later
            while dark is not None and _gray(dark.to_image(), (180, 400)).mean() > 10:
                dark = client.wait_frame(dark.seq, timeout=max(0.1, deadline - time.monotonic()))
            assert dark is not None, "the video never showed the black screen"
        finally:
            phone.set_faults(black_screenshots=False)
    # closing the client stops the server and removes the forward
    deadline = time.monotonic() + 5
    while phone.scrcpy.sessions and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not phone.scrcpy.sessions
    assert not [f for f in dev.forward_list() if f.serial == phone.serial]


def test_control_socket_touch_and_key_reach_the_phone(phone: VirtualPhone) -> None:
    dev = adbutils.adb.device(phone.serial)
    dev.shell(["monkey", "-p", TICKET, "1"])
    with ScrcpyClient(dev, ClientOptions(max_size=1600)) as client:
        assert client.wait_frame(0, timeout=15) is not None, client.error
        before = len(phone.events)
        client.tap(360, 800)  # the middle of a 720x1600 frame
        client.key(4)  # KEYCODE_BACK
        deadline = time.monotonic() + 5
        while len(phone.events) - before < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        events = phone.events.events(before)
    assert [e.kind for e in events] == [InputKind.TOUCH_DOWN, InputKind.TAP, InputKind.KEY]
    assert all(e.source is InputSource.SCRCPY for e in events)
    assert (events[1].x, events[1].y) == (540, 1200)  # scaled back to the phone's pixels
    assert events[2].key == "back"


def test_the_barrier_returns_once_earlier_input_was_applied(phone: VirtualPhone) -> None:
    dev = adbutils.adb.device(phone.serial)
    phone.ui.clipboard = None
    with ScrcpyClient(dev, ClientOptions(max_size=1600)) as client:
        # scrcpy answers GET_CLIPBOARD only while the clipboard holds text
        assert not client.confirms_input and not client.barrier(0.5)
    phone.ui.clipboard = "realbench test clip"
    try:
        with ScrcpyClient(dev, ClientOptions(max_size=1600)) as client:
            assert client.confirms_input
            for _ in range(3):
                before = len(phone.events)
                client.tap(100, 100)
                client.key(4)
                assert client.barrier()
                # no waiting: the answer came after the phone applied both
                kinds = [e.kind for e in phone.events.events(before)]
                assert kinds == [InputKind.TOUCH_DOWN, InputKind.TAP, InputKind.KEY], kinds
    finally:
        phone.ui.clipboard = None


def test_the_server_refuses_what_scrcpy_refuses(phone: VirtualPhone) -> None:
    dev = adbutils.adb.device(phone.serial)
    launch = f"app_process / {proto.SERVER_CLASS}"
    missing = dev.shell(
        f"CLASSPATH=/data/local/tmp/none.jar {launch} {proto.SERVER_VERSION} tunnel_forward=true"
    )
    assert "Could not find or load main class" in missing
    dev.sync.push(b"x", "/data/local/tmp/s.jar")
    mismatch = dev.shell(f"CLASSPATH=/data/local/tmp/s.jar {launch} 2.4 tunnel_forward=true")
    assert "does not match the client (2.4)" in mismatch
    unknown = dev.shell(
        f"CLASSPATH=/data/local/tmp/s.jar {launch} {proto.SERVER_VERSION} tunnel_forward=true x=1"
    )
    assert "Unknown server option: x" in unknown
    assert not phone.scrcpy.sessions


def test_a_server_that_never_answers_is_reported_not_hung(
    phone: VirtualPhone, monkeypatch: pytest.MonkeyPatch
) -> None:
    dev = adbutils.adb.device(phone.serial)
    monkeypatch.setattr("devices.scrcpy_client.CONNECT_TIMEOUT_S", 2.0)
    started = time.monotonic()
    with pytest.raises(ScrcpyUnavailable, match="never answered"):
        ScrcpyClient(dev, ClientOptions(server_version="9.9")).start()  # a server the phone refuses
    assert time.monotonic() - started < 6
    assert not [f for f in dev.forward_list() if f.serial == phone.serial]


def test_episode_video_records_through_scrcpy_else_screenrecord(
    phone: VirtualPhone, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    import av

    from devices.episode_video import PhoneRecording, start_recording
    from devices.scrcpy_recording import ScrcpyRecording

    dev = adbutils.adb.device(phone.serial)
    dev.shell(["input", "keyevent", "3"])
    recording = start_recording(phone.serial)
    assert isinstance(recording, ScrcpyRecording)
    time.sleep(1.0)
    dev.shell(["monkey", "-p", TICKET, "1"])  # the screen changes while recording
    time.sleep(1.0)
    data = recording.stop()
    assert data is not None and data[4:8] == b"ftyp"
    with av.open(io.BytesIO(data), "r") as container:
        frames = [f.to_image() for f in container.decode(video=0)]
    assert len(frames) >= 4 and frames[0].size == (1080, 2400)  # the phone's own size
    assert np.abs(_gray(frames[0], (180, 400)) - _gray(frames[-1], (180, 400))).mean() > 2.0
    assert not phone.scrcpy.sessions  # stopping the recording stopped the server
    # where scrcpy cannot start, screenrecord records instead

    def refuse(device: object) -> bytes:
        raise ScrcpyUnavailable("no server jar (test)")

    monkeypatch.setattr("devices.scrcpy_client.server_jar", refuse)
    fallback = start_recording(phone.serial)
    assert isinstance(fallback, PhoneRecording)
    time.sleep(1.0)
    assert (fallback.stop() or b"")[4:8] == b"ftyp"
