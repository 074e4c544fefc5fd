"""Which of a host's processes count as Chromium's, and as which kind (read from /proc)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from devices.clone_browser import descendant_pids, descendants
from devices.rl.browser import chromium_command_lines, process_type

# A stand-in browser: a process named like Chromium that forks a child and never execs it, as the
# browser does for a moment each time it launches a GPU or utility process.
FORKS = "import os, time; os.fork(); time.sleep(30)"
SLEEPS = "import time; time.sleep(30)"
T = TypeVar("T")


def _wait_for(pred: Callable[[], T], timeout: float = 10.0) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = pred()
        if found:
            return found
        time.sleep(0.02)
    raise AssertionError("timed out")


def _end(proc: subprocess.Popen[bytes]) -> None:
    for pid in descendant_pids(proc.pid):
        os.kill(pid, signal.SIGKILL)
    proc.kill()
    proc.wait()


def test_a_forked_child_not_yet_execd_is_not_a_second_browser(tmp_path: Path):
    name = tmp_path / "chromium"
    proc = subprocess.Popen([str(name), "-c", FORKS], executable=sys.executable)
    try:

        def forked() -> list[int]:
            tree = descendants(os.getpid())
            return [p for p in tree if tree[p] == proc.pid]

        [child] = _wait_for(forked)
        same = (Path("/proc") / str(child) / "cmdline").read_bytes()
        assert same == (Path("/proc") / str(proc.pid) / "cmdline").read_bytes()  # the race's state
        assert str(name) in same.decode()
        lines = chromium_command_lines(os.getpid())
        assert list(lines) == [proc.pid]
        assert process_type(lines[proc.pid]) == "browser"
        assert {proc.pid, child} <= set(descendant_pids(os.getpid()))
    finally:
        _end(proc)


def test_children_that_exec_their_own_command_line_are_listed_with_their_type(tmp_path: Path):
    browser, renderer = tmp_path / "chromium", tmp_path / "chromium-renderer"
    spawn = (
        "import subprocess, time; "
        f"subprocess.Popen([{str(renderer)!r}, '-c', {SLEEPS!r}, '--type=renderer'], executable={sys.executable!r}); "
        "time.sleep(30)"
    )
    proc = subprocess.Popen([str(browser), "-c", spawn], executable=sys.executable)
    try:
        lines = _wait_for(lambda: len(found := chromium_command_lines(os.getpid())) == 2 and found)
        assert sorted(process_type(argv) for argv in lines.values()) == ["browser", "renderer"]
        tree = descendants(os.getpid())
        order = list(tree)
        [child] = [p for p in lines if p != proc.pid]
        assert order.index(proc.pid) < order.index(child)  # parents come before their children
    finally:
        _end(proc)
