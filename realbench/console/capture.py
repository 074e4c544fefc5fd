"""A capture of one phone screen: the input of clone-fidelity measurement.

A capture folder holds ``screen.jpg``, ``hierarchy.xml`` and ``capture.json`` (serial, model,
foreground package and activity, the app's version, the phone profile, the time, and an optional
label naming the clone screen it corresponds to). It is written under a temporary name and
renamed, so a folder that exists is complete.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from realbench.errors import DeviceError

_RESUMED = re.compile(
    r"(?:mResumedActivity|ResumedActivity|mCurrentFocus)[^\n]*?\s([A-Za-z0-9_.]+)/([A-Za-z0-9_.$]+)"
)
CAPTURE_QUALITY = 90


class CapturablePhone(Protocol):
    @property
    def serial(self) -> str: ...

    def screenshot_frame(self, *, scale: float = 1.0, quality: int = 70) -> bytes: ...

    def hierarchy(self) -> str: ...

    def shell(self, cmd: str | list[str]) -> str: ...

    def app_version(self, package: str) -> str | None: ...

    def current_app(self) -> str | None: ...

    def describe(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class Foreground:
    package: str | None
    activity: str | None


def foreground(phone: CapturablePhone) -> Foreground:
    """The resumed activity from `dumpsys activity activities` (the package from uiautomator when
    dumpsys does not say)."""
    try:
        out = phone.shell(["dumpsys", "activity", "activities"])
    except DeviceError:
        out = ""
    m = _RESUMED.search(out)
    if m:
        return Foreground(m.group(1), m.group(2))
    return Foreground(phone.current_app(), None)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:60] or "screen"


def capture_screen(
    phone: CapturablePhone,
    out_dir: Path,
    *,
    label: str = "",
    profile: dict[str, Any] | None = None,
    redact: Any = None,
) -> Path:
    """Capture the phone's current screen into a new folder under `out_dir`; returns the folder."""
    t = time.time()
    jpeg = phone.screenshot_frame(scale=1.0, quality=CAPTURE_QUALITY)
    xml = phone.hierarchy()
    if redact is not None:
        xml = redact(xml)
    fg = foreground(phone)
    meta = {
        "kind": "realbench-capture",
        "serial": phone.serial,
        "device": phone.describe(),
        "package": fg.package,
        "activity": fg.activity,
        "app_version": phone.app_version(fg.package) if fg.package else None,
        "profile": profile,
        "time": t,
        "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t)),
        "label": label or None,
        "files": {"screenshot": "screen.jpg", "hierarchy": "hierarchy.xml"},
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(t)) + f"-{int(t * 1000) % 1000:03d}"
    name = f"{stamp}-{_slug(phone.serial)}" + (f"-{_slug(label)}" if label else "")
    final = out_dir / name
    tmp = out_dir / f".{name}.tmp{os.getpid()}"
    tmp.mkdir()
    (tmp / "screen.jpg").write_bytes(jpeg)
    (tmp / "hierarchy.xml").write_text(xml, encoding="utf-8")
    (tmp / "capture.json").write_text(json.dumps(meta, ensure_ascii=False, indent=1), encoding="utf-8")
    os.replace(tmp, final)
    return final
