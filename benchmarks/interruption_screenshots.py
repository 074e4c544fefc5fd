"""Screenshots of the real apps' interruptions as the clones show them under the `interruptions`
drift: ``python benchmarks/interruption_screenshots.py [OUT_DIR]`` (default
docs/screenshots/interruptions). One clone-server session per interruption, headless Chromium at
412x915 CSS px, scale 1."""

from __future__ import annotations

import sys
from pathlib import Path

import httpx

import clones.registry  # noqa: F401  (registers the built-in clones)
from clones.base import get_clone
from clones.interruptions import CATALOGUE
from clones.server import CloneServer
from devices.clone_browser import BrowserPool, Emulation
from devices.clone_device import CloneDevice
from realbench.observation import ImageFormat

ROOT = Path(__file__).resolve().parents[1]


def main(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    with CloneServer() as server, BrowserPool() as pool:
        for clone_name, items in CATALOGUE.items():
            clone = get_clone(clone_name)
            for item in items:
                body = {"clone": clone_name, "drift": {"interruptions": [item.name]}}
                session = httpx.post(f"{server.url}/api/sessions", json=body, timeout=30).json()["session"]
                device = CloneDevice(
                    pool, server.url, clone, emulation=Emulation(scale=1.0), image_format=ImageFormat.PNG
                )
                try:
                    device.open(session)
                    (out_dir / f"{item.name}.png").write_bytes(device.observe().screenshot.data)
                finally:
                    device.close()
                print(f"{item.name}: {item.evidence}")
    print(f"screenshots in {out_dir}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "screenshots" / "interruptions")
