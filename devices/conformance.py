"""`check_device`: what every Device implementation must satisfy, run in the tests over all of them
(headless clone pages, phones through uiautomator2 — virtual phones in CI).
"""

from __future__ import annotations

from realbench.actions import Click, Key, KeyPress, Swipe
from realbench.device import Device, DeviceKind
from realbench.errors import RealbenchError
from realbench.hierarchy import Hierarchy
from realbench.observation import ImageFormat, Screenshot


def check_device(device: Device) -> list[str]:
    """Problems found (empty when the device conforms). Acts on the device: use a scratch screen."""
    problems: list[str] = []
    if not isinstance(device, Device):
        return ["does not implement the Device protocol"]
    if not isinstance(device.kind, DeviceKind):
        problems.append(f"kind {device.kind!r} is not a DeviceKind")
    if not device.serial:
        problems.append("empty serial")
    width, height = device.size()
    if width <= 0 or height <= 0:
        problems.append(f"bad size {width}x{height}")
    obs = device.observe()
    shot = obs.screenshot
    try:
        decoded = Screenshot.from_bytes(shot.data)
    except Exception as exc:  # any decoder failure is a conformance finding
        problems.append(f"screenshot does not decode: {exc}")
    else:
        if (decoded.width, decoded.height) != (shot.width, shot.height):
            problems.append(
                f"screenshot says {shot.width}x{shot.height} but decodes as {decoded.width}x{decoded.height}"
            )
        if decoded.format is not shot.format or shot.format not in (ImageFormat.JPEG, ImageFormat.PNG):
            problems.append(f"screenshot format {shot.format} does not match its bytes ({decoded.format})")
    if obs.hierarchy is None:
        problems.append("observe() gave no hierarchy")
    else:
        try:
            h = Hierarchy(obs.hierarchy)
        except RealbenchError as exc:
            problems.append(f"hierarchy does not parse: {exc.message}")
        else:
            if not h.nodes:
                problems.append("hierarchy has no nodes")
            screen = h.screen
            if screen.right > width + 1 or screen.bottom > height + 1:
                problems.append(f"hierarchy bounds {screen} exceed the screen {width}x{height}")
    if not obs.app:
        problems.append("observe() names no foreground app")
    for action in (Swipe(x=500, y=700, x2=500, y2=400), Click(x=500, y=500), KeyPress(key=Key.BACK)):
        try:
            device.act(action)
        except RealbenchError as exc:
            problems.append(f"act({action.type}) failed: {exc.message}")
    try:
        device.observe()
    except RealbenchError as exc:
        problems.append(f"observe() after acting failed: {exc.message}")
    return problems
