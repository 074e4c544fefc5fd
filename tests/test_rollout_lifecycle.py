"""The rollout service's processes: a SIGTERM stops everything within the shutdown timeout, and a
SIGKILLed service leaves no worker or browser behind. Evidence: the process table."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import psutil
import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _start(tmp_path: Path) -> tuple[subprocess.Popen[str], list[psutil.Process]]:
    log = (tmp_path / "service.log").open("w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "realbench",
            "rollout-service",
            "--port",
            "0",
            "--workers",
            "1",
            "--shutdown-timeout",
            "5",
            "--pack-dir",
            str(tmp_path),
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if re.search(r"rollout service on http://", (tmp_path / "service.log").read_text()):
            break
        assert proc.poll() is None, (tmp_path / "service.log").read_text()
        time.sleep(0.5)
    else:
        proc.kill()
        pytest.fail("the service did not start")
    # A worker starts its browser with its first environment: create one, so there is a browser
    # to leave behind.
    try:
        created = httpx.post(
            f"{_service_url(tmp_path)}/v1/envs", json={"pack": "train_ticketing"}, timeout=120
        )
        assert created.status_code == 200, created.text
    except BaseException:
        proc.kill()
        raise
    family = psutil.Process(proc.pid).children(recursive=True)
    assert any("chrom" in p.name() for p in family), "the worker runs a browser"
    return proc, family


def _service_url(tmp_path: Path) -> str:
    """The address the service logged when it came up."""
    return re.search(r"http://[\d.]+:\d+", (tmp_path / "service.log").read_text()).group(0)  # type: ignore[union-attr]


def _kill_all(proc: subprocess.Popen[str], family: list[psutil.Process]) -> None:
    """Whatever the test found, nothing it started outlives it."""
    for p in family:
        with contextlib.suppress(psutil.Error):
            p.kill()
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)


def _gone(procs: list[psutil.Process], within: float) -> list[psutil.Process]:
    _, alive = psutil.wait_procs(procs, timeout=within)
    return alive


def test_sigterm_stops_service_and_workers_within_the_timeout(tmp_path):
    proc, family = _start(tmp_path)
    try:
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=40)
        took = time.monotonic() - t0
        alive = _gone(family, within=15)
        assert not alive, f"left behind: {[p.name() for p in alive]}"
        assert took < 40
    finally:
        _kill_all(proc, family)


def _busy_the_worker(tmp_path: Path) -> threading.Thread:
    """Ask for an environment whose pack takes the worker many seconds to parse (large, not a bomb)."""
    slow = tmp_path / "slow" / "pack.yaml"
    slow.parent.mkdir()
    slow.write_text("x_pad: [" + "1," * 450_000 + "1]\n", encoding="utf-8")
    url = _service_url(tmp_path)

    def create() -> None:
        with contextlib.suppress(httpx.HTTPError):  # the service is killed under it
            httpx.post(f"{url}/v1/envs", json={"pack": str(slow)}, timeout=120)

    thread = threading.Thread(target=create, daemon=True)
    thread.start()
    return thread


def _cpu_s(p: psutil.Process) -> float:
    t = p.cpu_times()
    return float(t.user + t.system)


def test_a_killed_service_leaves_no_worker_or_browser(tmp_path):
    proc, family = _start(tmp_path)
    try:
        (worker,) = [p for p in psutil.Process(proc.pid).children() if p.children()]  # the one with a browser
        before = _cpu_s(worker)
        _busy_the_worker(tmp_path)
        deadline = time.monotonic() + 60
        while _cpu_s(worker) - before < 2.0:  # it is parsing the slow pack: a busy worker
            assert time.monotonic() < deadline, "the worker never got busy"
            time.sleep(0.5)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        alive = _gone(family, within=20)
        assert not alive, f"orphans after the service died: {[p.name() for p in alive if p.is_running()]}"
    finally:
        _kill_all(proc, family)
