"""A Chromium the pool starts itself (`devices/chromium_launch.py`, `Launcher.DIRECT`).

The evidence is the process table and the files on disk, not the pool's own report: the command
line Playwright would have run, a browser that dies with the process that started it however that
process ends, nothing left behind by a close or a failed start, and a death the pool notices."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from devices import chromium_launch
from devices.chromium_launch import ChromiumProcess
from devices.clone_browser import DEFAULT_CHROMIUM, BrowserPool, Emulation, Launcher
from devices.rl.cdp import devtools_browsers
from devices.rl.host import RL_BROWSER_ARGS
from realbench.errors import DeviceError
from realbench.procfs import GROUP, STATE, stat_fields

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not chromium_launch.available(), reason="starts Chromium itself on Linux only"),
]

GONE_WAIT_S = 10.0
# a fixed port switch, so that both launches carry the same arguments (a pool mark would differ)
SAME_ARGS = (*RL_BROWSER_ARGS, "--remote-debugging-port=0")


def _alive(pid: int) -> bool:
    """A process that exists and is not a zombie."""
    fields = stat_fields(pid)
    return fields is not None and fields[STATE] != "Z"


def _group(pgid: int) -> list[int]:
    """Live processes of process group `pgid`."""
    found = []
    for entry in Path("/proc").iterdir():
        fields = stat_fields(entry.name) if entry.name.isdigit() else None
        if fields is not None and int(fields[GROUP]) == pgid and fields[STATE] != "Z":
            found.append(int(entry.name))
    return found


def _wait_gone(pgid: int) -> list[int]:
    deadline = time.monotonic() + GONE_WAIT_S
    while _group(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _group(pgid)


def _argv(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]


def _browser_argv_below(root: int) -> list[str]:
    [argv] = devtools_browsers(root).values()
    return argv


def _without_profile(argv: list[str]) -> list[str]:
    return ["--user-data-dir=*" if a.startswith("--user-data-dir=") else a for a in argv[1:]]


def _own_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def test_the_command_line_is_the_one_playwright_runs() -> None:
    with BrowserPool(extra_args=SAME_ARGS, launcher=Launcher.PLAYWRIGHT) as theirs:
        playwright = _browser_argv_below(os.getpid())
        assert theirs._process is None
    with BrowserPool(extra_args=SAME_ARGS, launcher=Launcher.DIRECT) as ours:
        assert ours._process is not None and ours._browser is None
        direct = _browser_argv_below(ours._process.pid)  # below Debian's wrapper script, if any
    assert _without_profile(direct) == _without_profile(playwright)
    assert playwright[0] == direct[0]  # the same binary, after Debian's wrapper script


def test_a_port_is_added_when_the_arguments_name_none(tmp_path: Path) -> None:
    argv = chromium_launch.command_line("chromium", ["--mute-audio"], tmp_path)
    assert argv.count("--remote-debugging-port=0") == 1 and argv[-2:] == [
        "--remote-debugging-pipe",
        "--no-startup-window",
    ]
    argv = chromium_launch.command_line("chromium", ["--remote-debugging-port=9333"], tmp_path)
    assert not any(a == "--remote-debugging-port=0" for a in argv)


_STARTER = """
import json, os, sys, time
from devices.clone_browser import BrowserPool, Launcher
pool = BrowserPool(launcher=Launcher.DIRECT).start()
print(json.dumps({"pid": pool._process.pid, "folder": str(pool._process.folder)}), flush=True)
if sys.argv[1] == "exit":
    sys.exit(0)  # the pool left open: what the process leaves at exit
time.sleep(600)
"""


def _start_in_child(how: str) -> tuple[subprocess.Popen[str], dict[str, object]]:
    child = subprocess.Popen(
        [sys.executable, "-c", _STARTER, how],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[1],
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line, "the child printed nothing"
    return child, json.loads(line)


def test_a_killed_python_takes_its_browser_and_the_browsers_children_with_it() -> None:
    child, started = _start_in_child("wait")
    pid = int(str(started["pid"]))
    folder = Path(str(started["folder"]))
    try:
        assert _alive(pid) and len(_group(pid)) >= 2  # the browser and at least its zygote
        assert folder not in chromium_launch.sweep_abandoned(folder.parent)  # its owner lives
        assert folder.is_dir()
        child.kill()  # SIGKILL: no Python code runs, no close
        child.wait(10)
        assert _wait_gone(pid) == [], "the browser outlived the process that started it"
        # nothing could remove its folder then; the next start anywhere does
        assert folder.is_dir()
        assert folder in chromium_launch.sweep_abandoned(folder.parent) and not folder.exists()
    finally:
        child.kill()
        for left in _group(pid):
            os.kill(left, signal.SIGKILL)


def test_a_pool_left_open_at_exit_leaves_no_browser_and_no_profile() -> None:
    child, started = _start_in_child("exit")
    assert child.wait(30) == 0
    assert _wait_gone(int(str(started["pid"]))) == []
    assert not Path(str(started["folder"])).exists()


def test_close_leaves_no_process_no_folder_and_no_descriptor() -> None:
    before = _own_fds()
    pool = BrowserPool(launcher=Launcher.DIRECT).start()
    assert pool._process is not None
    pid, folder = pool._process.pid, pool._process.folder
    assert (folder / "profile").is_dir() and _alive(pid)
    # a session of its own, as Playwright's: a terminal's Ctrl-C is not the browser's
    assert os.getsid(pid) == pid != os.getsid(0)
    pool.close()
    assert _group(pid) == [] and not _alive(pid)  # exited and waited for (no zombie)
    assert not folder.exists()
    assert _own_fds() == before


def test_a_killed_browser_is_noticed_and_a_new_one_started(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="devices.clone_browser")
    with BrowserPool(launcher=Launcher.DIRECT) as pool:
        assert pool._process is not None
        old, generation = pool._process.pid, pool.generation
        browser = next(iter(devtools_browsers(old)), old)  # below Debian's wrapper script, if any
        os.kill(browser, signal.SIGKILL)  # the browser itself, as a crash would end it
        deadline = time.monotonic() + GONE_WAIT_S
        while pool.running and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not pool.running and "exited" in str(pool._lost)
        assert f"Chromium {old} exited with" in caplog.text  # the log says so, closing would not
        assert _wait_gone(old) == [] and not _alive(old) and not _alive(browser)  # all reaped
        pool.start()
        assert pool.running and pool.generation == generation + 1
        assert pool._process is not None and pool._process.pid != old and _alive(pool._process.pid)


def _fake_chromium(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "chromium"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)
    return script


def _folders() -> set[Path]:
    import tempfile

    return set(Path(tempfile.gettempdir()).glob("realbench-chromium-*"))


def test_a_browser_that_fails_to_start_says_why_and_leaves_nothing(tmp_path: Path) -> None:
    fake = _fake_chromium(tmp_path, 'echo "cannot open display: a reason only the browser knows" >&2\nexit 3')
    before, fds = _folders(), _own_fds()
    with pytest.raises(DeviceError, match="a reason only the browser knows"):
        asyncio.run(ChromiumProcess.start(fake, [], 10))
    assert _folders() == before and _own_fds() == fds


def test_a_browser_that_never_answers_is_killed_with_its_children(tmp_path: Path) -> None:
    # the "browser" starts a child of its own and never reads its pipe
    marker = tmp_path / "pids"
    fake = _fake_chromium(tmp_path, f"sleep 600 & echo $$ $! > {marker}\nwait")
    before = _folders()
    started = time.monotonic()
    with pytest.raises(DeviceError, match="did not answer within 1 s"):
        asyncio.run(ChromiumProcess.start(fake, [], 1))
    assert time.monotonic() - started < 1 + chromium_launch.KILL_WAIT_S
    shell, sleeper = map(int, marker.read_text().split())
    assert not _alive(shell) and not _alive(sleeper)
    assert _folders() == before


def test_browsers_started_at_once_each_hold_only_their_own_pipe() -> None:
    """Two threads start a browser each at the same moment. A browser that inherited the other's
    end of a pipe would keep it open after its owner let go: the first must exit when only its own
    pipe closes, while the second runs on."""
    started = threading.Barrier(2, timeout=60)
    first_checked = threading.Event()
    seen: dict[str, object] = {}

    async def run(name: str) -> None:
        browser = await ChromiumProcess.start(DEFAULT_CHROMIUM, [], 30)
        try:
            started.wait()
            if name == "first":
                chromium_launch._close_fds(browser._open_fds)  # let go without asking it to close
                browser._open_fds.clear()
                seen["exit"] = await asyncio.wait_for(asyncio.shield(browser.exited), GONE_WAIT_S)
                first_checked.set()
            else:
                await asyncio.to_thread(first_checked.wait, 60)
                seen["second alive"] = not browser.exited.done() and _alive(browser.pid)
        finally:
            await browser.close()

    threads = [threading.Thread(target=asyncio.run, args=(run(name),)) for name in ("first", "second")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(90)
    assert "exit" in seen, "the first browser did not exit when its pipe closed"
    assert seen["second alive"] is True


def test_playwright_is_connected_only_when_a_page_needs_it() -> None:
    emulation = Emulation.for_short_side(448)
    with BrowserPool(launcher=Launcher.DIRECT, render_scale=emulation.scale) as pool:
        assert pool._pw is None and pool._browser is None
        opened = pool.call(pool.open_page(emulation, "data:text/html,<p>needs-playwright</p>"))

        async def text() -> str:
            return str(await opened.page.inner_text("p"))

        assert pool.call(text()) == "needs-playwright"
        assert pool._browser is not None and pool._process is not None
        pid = pool._process.pid
    assert _group(pid) == []


_RL_HOST = """
import json, os, sys
from devices.clone_browser import descendants
from devices.rl.host import EnvHost, StepRequest
from tests.rl_support import one_env
with EnvHost() as host:
    env_id = one_env(host, sys.argv[1])
    [t] = host.step([StepRequest(env_id, '{"type": "click", "x": 500, "y": 180}')])
    below = [open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")[0].decode().split(" ")[0] for pid in descendants(os.getpid())]
    print(json.dumps({
        "aborted": bool(t.info.get("aborted")),
        "modules": sorted(m for m in sys.modules if m.split(".")[0] == "playwright"),
        "programs": sorted(set(os.path.basename(p) for p in below)),
    }))
"""


def test_an_rl_host_neither_imports_playwrights_api_nor_starts_its_driver(rl_pack: str) -> None:
    out = subprocess.run(
        [sys.executable, "-c", _RL_HOST, rl_pack],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=Path(__file__).parents[1],
    ).stdout
    seen = json.loads(out.strip().splitlines()[-1])
    assert seen["aborted"] is False
    # `import playwright` alone (the package's few lines) is where the feature lists are read from
    assert seen["modules"] == ["playwright"]
    assert "node" not in seen["programs"] and any("chromium" in p for p in seen["programs"])


def _folder(root: Path, name: str, owner: str | None) -> Path:
    folder = root / f"{chromium_launch.FOLDER_PREFIX}{name}"
    (folder / "profile").mkdir(parents=True)
    if owner is not None:
        (folder / chromium_launch.OWNER_FILE).write_text(owner)
    return folder


def test_only_the_folders_of_gone_processes_are_swept(tmp_path: Path) -> None:
    me = f"{os.getpid()} {chromium_launch._process_start(os.getpid())}"
    mine = _folder(tmp_path, "mine", me)
    # this process's pid, but a start time it does not have: a process gone, its pid reused
    reused = _folder(tmp_path, "reused", f"{os.getpid()} 1")
    finished = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead = _folder(tmp_path, "dead", f"{finished.stdout.strip()} 1")
    just_made = _folder(tmp_path, "just-made", None)
    long_unowned = _folder(tmp_path, "long-unowned", None)
    old = time.time() - chromium_launch.UNOWNED_KEPT_S - 10
    os.utime(long_unowned, (old, old))
    damaged = _folder(tmp_path, "damaged", "not a pid")
    other = tmp_path / "someone-elses"
    other.mkdir()

    swept = chromium_launch.sweep_abandoned(tmp_path)
    assert sorted(swept) == sorted([reused, dead, long_unowned])
    assert not any(f.exists() for f in swept)
    assert mine.is_dir() and just_made.is_dir() and damaged.is_dir() and other.is_dir()
