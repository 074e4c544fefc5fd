"""Benchmark of the virtual phone through the real stack (not a test).

Starts a private adb server (free port), one virtual phone, and measures with uiautomator2 3.7.1
and adbutils 2.12.0 exactly as the farm calls them:
  - `u2.connect` on a fresh phone (md5 check, 3.7 MB jar push over sync, server launch, first ping);
  - one JSON-RPC call (`deviceInfo`): HTTP over a fresh `tcp:9008` stream per request;
  - one shell command (`adbutils shell2("echo ...")`, with the exit-code suffix);
  - one screenshot (`d.screenshot()`: takeScreenshot, base64 JPEG 1080x2400, decoded by PIL);
  - one hierarchy dump and one click (hit-tested and logged).

    .venv/bin/python benchmarks/vphone_rpc.py [--json] [--repeats 30] [--screens static|clone]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _timed(fn: Callable[[], Any], repeats: int) -> dict[str, float]:
    fn()  # warm-up
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    samples.sort()
    return {
        "p50_ms": round(statistics.median(samples), 1),
        "p95_ms": round(samples[min(len(samples) - 1, int(0.95 * len(samples)))], 1),
        "mean_ms": round(statistics.fmean(samples), 1),
        "n": len(samples),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--screens", default="static", choices=["static", "clone"])
    args = parser.parse_args()

    adb_port = _free_port()
    os.environ["ANDROID_ADB_SERVER_PORT"] = str(adb_port)
    import adbutils
    import uiautomator2 as u2

    from devices.virtual import VirtualPhoneHost

    adbutils.adb = adbutils.AdbClient(port=adb_port)
    subprocess.run(["adb", "start-server"], check=True, capture_output=True, timeout=30)
    results: dict[str, Any] = {
        "device_kind": "virtual-phone",
        "screens": args.screens,
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
        },
    }
    try:
        with VirtualPhoneHost() as host:
            info = host.start(1, screens=args.screens)[0]
            host.adb_connect(adb_port)
            t0 = time.perf_counter()
            d = u2.connect(info.serial)
            results["u2_connect_ms"] = round((time.perf_counter() - t0) * 1000, 1)
            if args.screens == "clone":
                d.app_start("com.MobileTicket")
            dev = adbutils.adb.device(info.serial)
            results["jsonrpc_deviceInfo"] = _timed(lambda: d.jsonrpc.deviceInfo(), args.repeats)
            results["shell_echo"] = _timed(lambda: dev.shell2("echo hello"), args.repeats)
            results["screenshot"] = _timed(lambda: d.screenshot(), args.repeats)
            results["dump_hierarchy"] = _timed(lambda: d.dump_hierarchy(), args.repeats)
            results["click"] = _timed(lambda: d.click(5, 5), args.repeats)
    finally:
        subprocess.run(["adb", "kill-server"], capture_output=True, timeout=30)

    if args.json:
        print(json.dumps(results))
        return 0
    print(f"virtual phone ({args.screens} screens) through adb {adb_port}, uiautomator2 3.7.1")
    print(f"  u2.connect (fresh phone, jar push):  {results['u2_connect_ms']:8.1f} ms")
    for key in ("jsonrpc_deviceInfo", "shell_echo", "screenshot", "dump_hierarchy", "click"):
        r = results[key]
        print(f"  {key:<36} p50 {r['p50_ms']:7.1f} ms   p95 {r['p95_ms']:7.1f} ms   (n={r['n']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
