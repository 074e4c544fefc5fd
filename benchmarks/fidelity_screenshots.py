"""The fidelity report on virtual-phone captures, and a screenshot of it for docs/fidelity.md:
``python benchmarks/fidelity_screenshots.py [OUT_DIR]`` (default docs/screenshots/fidelity).

Four virtual phones (a test rig, not phones) show the train clone undrifted and with the relabel,
layout and ads drift profiles; each home screen is captured through uiautomator2 and the real adb
server, and `realbench fidelity` scores them against the undrifted clone. Prints each score.
"""

from __future__ import annotations

import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# benchmarks/analysis.py would shadow the `analysis` package: drop this folder from the import path
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

import adbutils  # noqa: E402

from analysis.fidelity.captures import load_captures  # noqa: E402
from analysis.fidelity.measure import measure  # noqa: E402
from analysis.fidelity.report import write_report  # noqa: E402
from devices.clone_render import CloneScreenRenderer  # noqa: E402
from devices.phone import PhoneDevice  # noqa: E402
from devices.virtual import VirtualPhoneHost  # noqa: E402
from realbench.console.capture import capture_screen  # noqa: E402
from realbench.taskpack import load_pack  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DRIFTS = ("none", "relabel", "layout", "ads")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def capture_all(folder: Path) -> None:
    port = free_port()
    env = {**os.environ, "ANDROID_ADB_SERVER_PORT": str(port)}
    subprocess.run(["adb", "start-server"], env=env, check=True, capture_output=True, timeout=30)
    os.environ["ANDROID_ADB_SERVER_PORT"] = str(port)
    adbutils.adb = adbutils.AdbClient(port=port)
    try:
        with VirtualPhoneHost() as host:
            infos = host.start(len(DRIFTS), screens="clone", drift=list(DRIFTS))
            host.adb_connect(port)
            for info, drift in zip(infos, DRIFTS, strict=True):
                phone = PhoneDevice(info.serial, virtual=True)
                try:
                    phone.start_app("com.MobileTicket")
                    taken = capture_screen(phone, folder, label="train_ticketing/home")
                    os.replace(taken, folder / f"{DRIFTS.index(drift)}-{drift}")
                finally:
                    phone.close()
    finally:
        subprocess.run(["adb", "kill-server"], env=env, capture_output=True, timeout=30)


def main(out_dir: Path) -> None:
    from playwright.sync_api import sync_playwright

    out_dir.mkdir(parents=True, exist_ok=True)
    pack = load_pack(ROOT / "taskpacks" / "train_ticketing")
    with tempfile.TemporaryDirectory() as tmp:
        caps = Path(tmp) / "captures"
        caps.mkdir()
        capture_all(caps)
        with CloneScreenRenderer(pack) as renderer:
            measured = measure(load_captures(caps), renderer, pack=pack.app, clone=pack.clone)
            result, pairs = measured.result, measured.pairs
            per_screen = []
            for _ in range(3):  # warm: render and score each capture again, timed
                t0 = time.perf_counter()
                measure(load_captures(caps), renderer, pack=pack.app, clone=pack.clone)
                per_screen.append((time.perf_counter() - t0) / len(result.screens))
        report = write_report(Path(tmp) / "report.html", result, pairs)
        for s in result.screens:
            print(
                f"{s.capture:12s} score {s.score:.3f}  text R/P {s.text_recall:.2f}/{s.text_precision:.2f}"
                f"  elements {s.element_match:.2f}  SSIM {s.ssim:.2f}  colour {s.colour_distance:.2f}"
            )
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1240, "height": 900})
            page.goto(report.as_uri())
            page.screenshot(path=str(out_dir / "report.png"), full_page=False)
            page.locator("#s2").screenshot(path=str(out_dir / "relabel-pair.png"))
            browser.close()
    cpu = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in ln
        ),
        "?",
    )
    print(f"render + score per 1080x2400 screen: median {statistics.median(per_screen):.2f} s")
    print(f"machine: {cpu}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}")
    print(f"screenshots in {out_dir}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs" / "screenshots" / "fidelity")
