"""Capture folders (written by `realbench capture` and the console's capture button) and their labels.

A label names the clone screen a capture corresponds to, as a small URL:

    <clone>/<route>[?task=<task id>&steps=<n>&seed=<s>&scenario=<name>]

- ``train_ticketing/home`` — the clone's default start state, shown at route ``home``;
- ``train_ticketing/orders?scenario=with_orders`` — the same with ``setup.data.scenario``;
- ``bank/transfer_confirm?task=transfer_saved_payee&steps=6`` — the task's clone setup (instance
  seed ``seed``, default 0) after the first ``steps`` steps of its golden plan; the route then names
  where those steps must have led (the renderer refuses a label whose route does not match).

The clone prefix may be left out when the pack says which clone it is.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from realbench.errors import ConfigError

log = logging.getLogger(__name__)

CAPTURE_FILE = "capture.json"
_QUERY_KEYS = ("task", "steps", "seed", "scenario")


@dataclass(frozen=True)
class ScreenLabel:
    """Which clone screen a capture shows: a route, and the state (task setup or scenario) behind it."""

    route: str
    clone: str | None = None
    task: str | None = None
    steps: int = 0
    seed: int = 0
    scenario: str | None = None

    @classmethod
    def parse(cls, text: str) -> ScreenLabel:
        raw = text.strip()
        if not raw:
            raise ConfigError("a capture without a label cannot be scored", hint="capture with --label")
        parts = urlsplit(raw)
        if parts.scheme or parts.netloc:
            raise ConfigError(f"label {raw!r} is not <clone>/<route>[?task=...]")
        path = parts.path.strip("/")
        clone, _, route = path.rpartition("/")
        if not route:
            raise ConfigError(f"label {raw!r} names no route", hint="e.g. train_ticketing/home")
        query = parse_qs(parts.query, keep_blank_values=False)
        unknown = sorted(set(query) - set(_QUERY_KEYS))
        if unknown:
            raise ConfigError(f"label {raw!r}: unknown key(s) {unknown}", hint=f"known: {list(_QUERY_KEYS)}")

        def one(key: str) -> str | None:
            values = query.get(key)
            return values[-1] if values else None

        try:
            steps = int(one("steps") or 0)
            seed = int(one("seed") or 0)
        except ValueError:
            raise ConfigError(f"label {raw!r}: steps and seed are whole numbers") from None
        if steps < 0:
            raise ConfigError(f"label {raw!r}: steps must be >= 0")
        if steps and one("task") is None:
            raise ConfigError(f"label {raw!r}: steps need a task")
        return cls(
            route=route,
            clone=clone or None,
            task=one("task"),
            steps=steps,
            seed=seed,
            scenario=one("scenario"),
        )

    def __str__(self) -> str:
        query = [
            f"{k}={v}"
            for k, v in (("task", self.task), ("steps", self.steps or None), ("seed", self.seed or None))
            if v is not None
        ]
        if self.scenario:
            query.append(f"scenario={self.scenario}")
        head = f"{self.clone}/{self.route}" if self.clone else self.route
        return head + ("?" + "&".join(query) if query else "")


@dataclass(frozen=True)
class Capture:
    """One capture folder: the screenshot's bytes, the hierarchy XML and the facts beside them."""

    folder: Path
    meta: dict[str, Any]
    screenshot: bytes
    hierarchy: str
    label: ScreenLabel = field(compare=False)

    @property
    def name(self) -> str:
        return self.folder.name

    @property
    def package(self) -> str | None:
        value = self.meta.get("package")
        return str(value) if value else None

    @property
    def virtual(self) -> bool:
        """Taken on a virtual phone (its `device` record says so), not on a phone."""
        device = self.meta.get("device")
        if not isinstance(device, dict):
            return False
        return bool(device.get("virtual")) or device.get("kind") == "virtual-phone"


@dataclass(frozen=True)
class BadCapture:
    """A capture folder that cannot be read or scored, and why."""

    name: str
    reason: str


def load_capture(folder: Path) -> Capture:
    meta_path = folder / CAPTURE_FILE
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{meta_path}: not a capture ({exc})") from None
    files = meta.get("files") or {}
    shot = folder / str(files.get("screenshot", "screen.jpg"))
    xml = folder / str(files.get("hierarchy", "hierarchy.xml"))
    if not shot.is_file() or not xml.is_file():
        raise ConfigError(f"{folder}: the capture lacks its screenshot or hierarchy")
    label = ScreenLabel.parse(str(meta.get("label") or ""))
    return Capture(folder, meta, shot.read_bytes(), xml.read_text(encoding="utf-8"), label)


def load_captures(root: Path, bad: list[BadCapture] | None = None) -> list[Capture]:
    """Every labelled capture under `root` (the folder itself when it is one), in name order;
    captures without a label are skipped with a warning. A capture that cannot be read (a broken
    capture.json, a missing screenshot, a malformed label) is appended to `bad` with its reason and
    the rest load; without `bad` it raises."""
    if (root / CAPTURE_FILE).is_file():
        return [load_capture(root)]
    if not root.is_dir():
        raise ConfigError(f"{root} is not a folder of captures")
    folders = sorted(p.parent for p in root.glob(f"*/{CAPTURE_FILE}") if not p.parent.name.startswith("."))
    captures = []
    for folder in folders:
        if not _label_of(folder):
            log.warning("%s has no label: not scored", folder.name)
            continue
        try:
            captures.append(load_capture(folder))
        except ConfigError as exc:
            if bad is None:
                raise
            log.warning("%s not scored: %s", folder.name, exc.message)
            bad.append(BadCapture(folder.name, exc.message))
    if not captures:
        why = "; ".join(f"{b.name}: {b.reason}" for b in bad or [])
        raise ConfigError(
            f"no labelled captures under {root}" + (f" that can be read ({why})" if why else ""),
            hint="take some with `realbench capture --label ...`",
        )
    return captures


def _label_of(folder: Path) -> str:
    try:
        return str(json.loads((folder / CAPTURE_FILE).read_text(encoding="utf-8")).get("label") or "")
    except (OSError, ValueError):
        return "?"  # unreadable: load_capture says why
