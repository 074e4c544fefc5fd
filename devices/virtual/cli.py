"""`realbench vphone up|down|ls`: background hosts of virtual phones, recorded in a state file.

The state file (`$XDG_RUNTIME_DIR/realbench/vphones.json`, else `~/.cache/realbench/vphones.json`)
lists every host process `up` started: its pid, control URL, adb server port and phones.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from devices.virtual.host import run_adb
from realbench.errors import DeviceError, ServerError
from realbench.procfs import STATE, stat_fields

log = logging.getLogger(__name__)
READY_TIMEOUT_S = 60.0


def state_dir() -> Path:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = Path(runtime) if runtime else Path.home() / ".cache"
    return base / "realbench"


def state_file() -> Path:
    return state_dir() / "vphones.json"


def load_state() -> list[dict[str, Any]]:
    path = state_file()
    if not path.exists():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        log.warning("ignoring unreadable %s", path)
        return []
    return data if isinstance(data, list) else []


def save_state(hosts: list[dict[str, Any]]) -> None:
    path = state_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(hosts, indent=2), encoding="utf-8")
    tmp.replace(path)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # An exited host whose parent (the `up` command) is gone may linger as a zombie where PID 1
    # does not reap (containers): it is dead all the same.
    fields = stat_fields(pid)
    return fields is None or fields[STATE] != "Z"


def up(
    n: int,
    drift: str = "none",
    apps: list[str] | None = None,
    screens: str = "auto",
    profile: str | None = None,
    adb_port: int | None = None,
    connect: bool = True,
) -> dict[str, Any]:
    """Start a host process with n phones, `adb connect` each, record it; returns the host record."""
    log_path = state_dir() / f"vphone-{int(time.time() * 1000)}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "devices.virtual.serve",
        "--n",
        str(n),
        "--drift",
        drift,
        "--screens",
        screens,
    ]
    if apps:
        cmd += ["--apps", ",".join(apps)]
    if profile:
        cmd += ["--profile", profile]
    with log_path.open("ab") as log_file:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=log_file, stdin=subprocess.DEVNULL, start_new_session=True
        )
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], READY_TIMEOUT_S)
    line = proc.stdout.readline() if ready else b""
    proc.stdout.close()
    try:
        info = json.loads(line) if line else None
    except ValueError:
        info = None
    if not info or "error" in info:
        if proc.poll() is None:
            proc.terminate()
        reason = (info or {}).get("error") or f"no ready line within {READY_TIMEOUT_S:.0f} s"
        raise ServerError(f"virtual phone host did not start: {reason}", hint=f"see the log {log_path}")
    record = {**info, "adb_port": adb_port, "log": str(log_path), "started": time.time(), "connected": []}
    hosts = load_state()
    hosts.append(record)
    save_state(hosts)
    if connect:
        run_adb(["start-server"], adb_port)
        for phone in record["phones"]:
            out = run_adb(["connect", phone["serial"]], adb_port)
            if "connected" not in out:
                raise DeviceError(
                    f"adb connect {phone['serial']} failed: {out.strip()}",
                    hint="check `adb devices`; the phones keep running (`realbench vphone down` stops them)",
                )
            record["connected"].append(phone["serial"])
        save_state(hosts)
    return record


def _shutdown_host(record: dict[str, Any], timeout_s: float = 10.0) -> None:
    for serial in record.get("connected", []):
        try:
            run_adb(["disconnect", serial], record.get("adb_port"))
        except (DeviceError, ServerError) as exc:
            log.debug("adb disconnect %s: %s", serial, exc)
    pid = int(record["pid"])
    try:
        httpx.post(f"{record['control_url']}/shutdown", timeout=3)
    except httpx.HTTPError:
        if pid_alive(pid):
            os.kill(pid, signal.SIGTERM)
    deadline = time.time() + timeout_s
    while pid_alive(pid) and time.time() < deadline:
        time.sleep(0.1)
        _reap(pid)
    if pid_alive(pid):
        os.kill(pid, signal.SIGKILL)


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def down() -> list[dict[str, Any]]:
    """Disconnect and stop every recorded host; returns the records stopped."""
    hosts = load_state()
    for record in hosts:
        if pid_alive(int(record["pid"])):
            _shutdown_host(record)
    save_state([])
    return hosts


def ls() -> list[dict[str, Any]]:
    """Recorded hosts with liveness and each phone's state (from its control channel)."""
    out = []
    for record in load_state():
        alive = pid_alive(int(record["pid"]))
        phones = []
        for phone in record["phones"]:
            state: dict[str, Any] = {}
            if alive:
                try:
                    state = httpx.get(f"{phone['control_url']}/state", timeout=3).json()
                except (httpx.HTTPError, ValueError):
                    state = {}
            phones.append(
                {
                    **phone,
                    "alive": bool(state),
                    "foreground": state.get("foreground"),
                    "uiautomator_running": state.get("uiautomator_running"),
                }
            )
        out.append({**record, "alive": alive, "phones": phones})
    return out
