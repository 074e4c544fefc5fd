"""A private adb server for a test: a port of its own, so that nothing lands on a lab's 5037."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Mapping

ATTEMPTS = 4


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_adb_server(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Start an adb server on a free port; the environment that names it comes back.

    A port found free can be taken before adb binds it (parallel test processes open sockets all the
    time), and then `adb start-server` exits 255: a fresh port is tried, and only when every attempt
    fails does the test fail, with what adb said.
    """
    said = []
    for _ in range(ATTEMPTS):
        env = {**(os.environ if base is None else base), "ANDROID_ADB_SERVER_PORT": str(free_port())}
        run = subprocess.run(["adb", "start-server"], env=env, capture_output=True, text=True, timeout=30)
        if run.returncode == 0:
            return env
        said.append(f"port {env['ANDROID_ADB_SERVER_PORT']}: exit {run.returncode}: {run.stderr.strip()}")
        subprocess.run(["adb", "kill-server"], env=env, capture_output=True, timeout=30)
    raise RuntimeError("adb start-server failed on every port tried:\n" + "\n".join(said))


def kill_adb_server(env: Mapping[str, str]) -> None:
    subprocess.run(["adb", "kill-server"], env=dict(env), capture_output=True, timeout=30)
