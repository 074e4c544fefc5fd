"""Ctrl-C during a phone run on virtual phones (what the study's phone stage runs): one line and exit
130, no traceback from the phones' clone pages whose event sockets the interrupt closes, and the
episodes it cut short are neither given up nor counted as the phones' aborts.

The command runs as a user runs it, in its own process group, and gets SIGINT the way a terminal's
Ctrl-C sends it: to every process of the group, the virtual phones and their Chromium included.
Verdicts come from the command's exit, its stderr and `realbench show` over the store on disk."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from realbench.taskpack import load_pack
from tests.store_support import show_json

pytestmark = [
    pytest.mark.farm,
    pytest.mark.browser,
    pytest.mark.skipif(shutil.which("adb") is None, reason="needs Debian's adb"),
]

ROOT = Path(__file__).resolve().parent.parent
PACK_DIR = ROOT / "taskpacks" / "train_ticketing"


def _stored(store_dir: Path) -> int:
    try:
        db = sqlite3.connect(f"file:{store_dir / 'index.sqlite'}?mode=ro", uri=True)
    except sqlite3.Error:
        return 0
    try:
        return int(db.execute("SELECT COUNT(*) FROM episodes").fetchone()[0])
    except sqlite3.Error:
        return 0
    finally:
        db.close()


@pytest.mark.timeout(300)
def test_ctrl_c_on_virtual_phones_is_one_line_without_a_socket_traceback(tmp_path: Path) -> None:
    # a lookup task: short plans, so the first episodes are stored soon and many are still to run
    (task,) = [t.id for t in load_pack(PACK_DIR).tasks if t.answer.type.value != "none"][:1]
    out = tmp_path / "real"
    args = [sys.executable, "-m", "realbench", "run", "--pack", str(PACK_DIR), "--out", str(out)]
    args += ["--target", "real", "--rig", str(ROOT / "rigs" / "virtual.yaml"), "--agent", "synthetic:base"]
    args += ["--tasks", task, "--repeats", "30", "--no-progress"]
    proc = subprocess.Popen(
        args,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None and _stored(out) < 1:
            time.sleep(0.2)
        assert proc.poll() is None, "the run ended before it could be interrupted"
        assert _stored(out) >= 1, "no episode was stored in time: the phones never ran"
        os.killpg(proc.pid, signal.SIGINT)
        _, stderr = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "WebSocketDisconnect" not in stderr, stderr
    assert "run stopped (Ctrl-C)" in stderr
    (run,) = show_json(out)["runs"]
    assert run["episodes"] < 30 and run["episodes"] + run["interrupted"] >= 1, run
    assert (run["given_up"], run["abort_rate"]) == (0, 0.0), run
    assert "env_invalid" not in run["outcomes"], run["outcomes"]
