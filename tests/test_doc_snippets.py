"""Every shell snippet that README.md and docs/ mark runnable runs as written, so the documentation
cannot drift from the code.

A snippet is marked by an HTML comment on the line before its fence:

    <!-- runnable -->
    ```bash
    realbench check-pack taskpacks/toy --list
    ```

It runs under `bash -euo pipefail` in a scratch folder that links the repository's data folders
(taskpacks/, rigs/, …), with realbench on PATH, `PORT` and `JUDGE_PORT` set to free ports (snippets
start the fake model server there) and a private virtual-phone registry. Snippets that touch
phones (a rig, `vphone`, `devices`) are in the `farm` tier, those that open clone pages in the
`browser` tier.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from devices.rig import DEFAULT_ADB_PORT  # a lab's own adb server: a snippet must not start or use it
from tests.adb_support import free_port

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MARKER = "<!-- runnable -->"
FENCE = re.compile(r"^```(bash|sh)\s*$")
LINKED = (
    "taskpacks",
    "rigs",
    "examples",
    "benchmarks",
    "docs",
    "clones",
    "devices",
    "tests",
    "pyproject.toml",
)
SNIPPET_TIMEOUT_S = 300
PHONE_WORDS = ("--rig", "vphone", "devices ")
BROWSER_WORDS = ("realbench run", "clone-stats", "realbench demo")


@dataclass(frozen=True)
class Snippet:
    path: Path
    line: int  # 1-based line of the opening fence
    code: str

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def runnable_snippets(paths: list[Path]) -> list[Snippet]:
    found: list[Snippet] = []
    for path in paths:
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if line.strip() != MARKER:
                continue
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            if j >= len(lines) or not FENCE.match(lines[j].strip()):
                raise AssertionError(f"{path}:{i + 1}: {MARKER} must precede a ```bash or ```sh block")
            end = next((k for k in range(j + 1, len(lines)) if lines[k].strip() == "```"), None)
            if end is None:
                raise AssertionError(f"{path}:{j + 1}: unclosed code block")
            found.append(Snippet(path, j + 1, "\n".join(lines[j + 1 : end]) + "\n"))
    return found


SNIPPETS = runnable_snippets(DOCS)


def _params() -> list[object]:
    params: list[object] = []
    for s in SNIPPETS:
        phones = any(w in s.code for w in PHONE_WORDS)
        browser = any(w in s.code for w in BROWSER_WORDS)
        marks = [pytest.mark.farm, pytest.mark.slow] if phones else [pytest.mark.browser] if browser else []
        params.append(pytest.param(s, id=s.name, marks=marks))
    return params


def test_the_marker_convention_is_used() -> None:
    names = {s.path.name for s in SNIPPETS}
    assert {"README.md", "models.md", "farm.md", "adding-a-task.md"} <= names, names


@pytest.mark.parametrize("snippet", _params())
def test_runnable_snippet(snippet: Snippet, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    for name in LINKED:
        (work / name).symlink_to(ROOT / name)
    venv_bin = Path(sys.executable).parent
    env = {
        **os.environ,
        "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONPATH": str(ROOT),
        "PORT": str(free_port()),
        "JUDGE_PORT": str(free_port()),
        "XDG_RUNTIME_DIR": str(tmp_path),  # `vphone up` in a snippet registers its phones here only
        "COLUMNS": "200",
        # A snippet's adb commands start a server of their own on this port, stopped below: the
        # default 5037 may belong to a lab's phones, and an adb server outlives the snippet's session.
        "ANDROID_ADB_SERVER_PORT": str(free_port()),
    }
    default_adb_before = _listening(DEFAULT_ADB_PORT)
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    # Output goes to files, not pipes: a background process the snippet failed to stop would hold a
    # pipe open and hang the test instead of failing it.
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", snippet.code],
            cwd=work,
            env=env,
            stdout=stdout,
            stderr=stderr,
            text=True,
            start_new_session=True,
        )
        try:
            returncode = proc.wait(timeout=SNIPPET_TIMEOUT_S)
        finally:
            left = _stop_session(proc.pid)
            default_adb_after = _listening(DEFAULT_ADB_PORT)
            if shutil.which("adb"):
                subprocess.run(["adb", "kill-server"], env=env, capture_output=True, timeout=30)
    stdout_text, stderr_text = out.read_text(), err.read_text()
    assert returncode == 0, (
        f"{snippet.name} exited {returncode}\n--- snippet\n{snippet.code}"
        f"--- stdout\n{stdout_text[-4000:]}\n--- stderr\n{stderr_text[-4000:]}"
    )
    assert "Traceback" not in stderr_text, stderr_text[-4000:]
    assert left == [], f"{snippet.name} left processes running after it ended: {left}"
    assert default_adb_before or not default_adb_after, f"{snippet.name} started an adb server on 5037"


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _stop_session(sid: int) -> list[str]:
    """Kill what is left of the snippet's session; returns what was still running 2 s after it ended."""
    import psutil

    deadline = time.monotonic() + 2
    while True:
        alive = [p for p in psutil.process_iter(["pid"]) if _session_of(p) == sid and p.pid != sid]
        alive = [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    left = []
    for p in alive:
        with contextlib.suppress(psutil.Error):
            left.append(" ".join(p.cmdline())[:120])
            p.kill()
    return left


def _session_of(process: object) -> int | None:
    try:
        return os.getsid(process.pid)  # type: ignore[attr-defined]
    except OSError:
        return None
