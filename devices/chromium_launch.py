"""Chromium started by this process itself, with the command line Playwright's launch gives it.

An RL worker drives its browser's pages over the browser's own DevTools websocket
(`devices.rl.cdp`); Playwright's driver was left only to start the browser and notice its death,
for the price of a Node process per worker (about 0.35 s of CPU to start, 110-120 MiB to keep) and of
importing Playwright (about 0.27 s). `ChromiumProcess` does those two jobs without it; a pool that
later needs Playwright for a page (a token-guarded server's headers) connects it to the running
browser then (`BrowserPool`, `Launcher.DIRECT`).

The browser's life is tied to this process's as Playwright ties it: file descriptors 3 and 4 of
the browser are a pipe pair (``--remote-debugging-pipe``) whose other ends only this process holds.
However this process ends, the kernel closes them and the browser, reading end of file, exits
(about 50 ms). The process is started with ``posix_spawn`` (safe in a threaded process, where
``fork`` with a ``preexec_fn`` is not) in a session of its own, as Playwright starts it: a
terminal's Ctrl-C reaches Python, which closes the browser, and not the browser first; and where
the kernel schedules sessions as groups (autogroup, on by default in Debian's), the browser and its
renderers share the CPU with the Python processes as a group of their own, as they did under
Playwright (docs/benchmarks.md: in the caller's session, steps/s fell by a few per cent). Its exit
is watched through a pidfd on the event loop.

Each browser's profile and log live in a folder of the temporary directory, removed at close. A
process killed before it could close leaves its folder (its browser exits all the same), so every
start first removes the folders whose starting process is gone (`sweep_abandoned`; the folder names
its owner by pid and start time, so a reused pid does not keep it). Only folders this user can read
are judged: processes that share the temporary directory across pid namespaces would look gone to
each other.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import functools
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devices.chromium_features import DISABLE, ENABLE, playwright_features
from realbench.errors import DeviceError
from realbench.procfs import START_TIME, stat_fields

log = logging.getLogger(__name__)

# Playwright's `chromiumSwitches` (1.65) in its order, its feature lists left out: they come from
# the driver's own source (`playwright_features`), and `launch_args` folds the caller's into them.
# tests/test_chromium_launch.py compares the whole command line with one Playwright launched.
SWITCHES_BEFORE_FEATURES = (
    "--disable-field-trial-config",
    "--disable-background-networking",
    "--disable-background-timer-throttling",
    "--disable-backgrounding-occluded-windows",
    "--disable-back-forward-cache",
    "--disable-breakpad",
    "--disable-component-extensions-with-background-pages",
    "--disable-component-update",
    "--no-default-browser-check",
    "--disable-default-apps",
    "--disable-dev-shm-usage",
    "--disable-edgeupdater",
    "--disable-extensions",
)
SWITCHES_AFTER_FEATURES = (
    "--allow-pre-commit-input",
    "--disable-hang-monitor",
    "--disable-ipc-flooding-protection",
    "--disable-popup-blocking",
    "--disable-prompt-on-repost",
    "--disable-renderer-backgrounding",
    "--disable-updater-scheduler",
    "--force-color-profile=srgb",
    "--metrics-recording-only",
    "--no-first-run",
    "--password-store=basic",
    "--use-mock-keychain",
    "--no-service-autorun",
    "--disable-search-engine-choice-screen",
    "--unsafely-disable-devtools-self-xss-warnings",
    "--enable-unsafe-swiftshader",
    "--edge-skip-compat-layer-relaunch",
    "--disable-stack-profiler",
    "--disable-infobars",
    "--disable-sync",
    "--do-not-de-elevate",
)
# Playwright's headless launch, without its sandbox (`chromiumSandbox` is off by default)
HEADLESS_SWITCHES = (
    "--headless",
    "--hide-scrollbars",
    "--mute-audio",
    "--blink-settings=primaryHoverType=2,availableHoverTypes=2,primaryPointerType=4,availablePointerTypes=4",
    "--no-sandbox",
)
PORT_SWITCH = "--remote-debugging-port="
PIPE_SWITCH = "--remote-debugging-pipe"
# the browser's ends of the DevTools pipe, as Chromium expects them
BROWSER_READS_FD = 3
BROWSER_WRITES_FD = 4
# above the standard streams and the browser's pipe ends, so that moving ours onto 3 and 4 in the
# child never writes over one not yet moved
SAFE_FD_FLOOR = 10
CLOSE_WAIT_S = 5.0
KILL_WAIT_S = 5.0
PORT_FILE_WAIT_S = 10.0
LOG_TAIL_LINES = 8
UNKNOWN_EXIT = -255
FOLDER_PREFIX = "realbench-chromium-"
PROFILE_DIR = "profile"
LOG_FILE = "chromium.log"  # the browser's standard error
OWNER_FILE = "owner"  # "<pid> <start time>" of the process that started the browser
# a folder with no owner written yet is another process's, just made (or one that died between
# making it and writing its owner, which is then swept once it is this old)
UNOWNED_KEPT_S = 60.0


@functools.cache
def available() -> bool:
    """Whether this platform can start a browser here (Linux: posix_spawn's descriptor moves, and
    pidfds, which the kernel has from 5.3 on)."""
    if not (
        sys.platform.startswith("linux") and hasattr(os, "pidfd_open") and hasattr(os, "POSIX_SPAWN_DUP2")
    ):
        return False
    try:
        os.close(os.pidfd_open(os.getpid()))
    except OSError:
        return False
    return True


def playwright_switches() -> list[str]:
    """Every switch Playwright's headless launch puts before the caller's arguments."""
    features = [
        f"{switch}{','.join(names)}"
        for switch, kind in ((DISABLE, "disabled"), (ENABLE, "enabled"))
        if (names := playwright_features(kind)) is not None
    ]
    return [*SWITCHES_BEFORE_FEATURES, *features, *SWITCHES_AFTER_FEATURES, *HEADLESS_SWITCHES]


def command_line(executable: str, args: list[str], profile: Path) -> list[str]:
    """The command line Playwright's ``chromium.launch(args=args, headless=True)`` runs, with a
    DevTools port (the pool's pages are reached over it) when `args` name none."""
    port = [] if any(a.startswith(PORT_SWITCH) for a in args) else [f"{PORT_SWITCH}0"]
    return [
        executable,
        *playwright_switches(),
        *args,
        *port,
        f"--user-data-dir={profile}",
        PIPE_SWITCH,
        "--no-startup-window",
    ]


PORT_FILE = "DevToolsActivePort"


def devtools_endpoint(profile: Path) -> str | None:
    """The DevTools websocket URL that the browser of profile folder `profile` wrote once it
    listened (its port, then its path), or None while there is none."""
    try:
        port, where = (profile / PORT_FILE).read_text().split()[:2]
    except (OSError, ValueError):  # not written yet, or the browser is gone
        return None
    return f"ws://127.0.0.1:{int(port)}{where}"


def _high_fd(fd: int) -> int:
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, SAFE_FD_FLOOR)
    os.close(fd)
    return moved


def _close_fds(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _abandoned(fds: list[int], folder: Path, pid: int) -> None:
    """A browser whose object was dropped unclosed, or left open at exit: closing its pipe ends it;
    its profile is removed once it has exited (it writes there until then)."""
    if not fds:
        return  # closed already
    _close_fds(fds)
    deadline = time.monotonic() + KILL_WAIT_S
    try:
        while os.waitpid(pid, os.WNOHANG) == (0, 0):
            if time.monotonic() >= deadline:
                os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                break
            time.sleep(0.01)
    except (ChildProcessError, ProcessLookupError):  # waited for elsewhere already
        pass
    shutil.rmtree(folder, ignore_errors=True)


def _process_start(pid: int) -> str | None:
    """When process `pid` started (clock ticks after boot), or None where there is no such process:
    with the pid, it names a process even after its pid is reused."""
    fields = stat_fields(pid)
    return None if fields is None or len(fields) <= START_TIME else fields[START_TIME]


def _owner_gone(folder: Path) -> bool:
    try:
        pid, started = (folder / OWNER_FILE).read_text().split()
    except FileNotFoundError:
        try:
            return time.time() - folder.stat().st_mtime > UNOWNED_KEPT_S
        except OSError:  # removed meanwhile
            return False
    except (OSError, ValueError):  # unreadable or damaged: not ours to judge
        return False
    return _process_start(int(pid)) != started


def sweep_abandoned(root: Path | None = None) -> list[Path]:
    """Remove the folders of browsers whose starting process is gone (killed before it could
    close them: its browser went with it, its folder stayed), and return them."""
    swept = []
    for folder in Path(root or tempfile.gettempdir()).glob(f"{FOLDER_PREFIX}*"):
        if folder.is_dir() and not folder.is_symlink() and _owner_gone(folder):
            shutil.rmtree(folder, ignore_errors=True)
            swept.append(folder)
    if swept:
        log.info("removed %d folder(s) of browsers whose process was gone", len(swept))
    return swept


@dataclass(eq=False)
class ChromiumProcess:
    """A running headless Chromium started by `start`; `close` ends it and removes its profile."""

    pid: int
    folder: Path  # the profile and the browser's log
    version: str = ""
    exited: asyncio.Future[int] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    # this process's end of the pipe the browser reads, while open; a finalizer closes it if the
    # object is dropped unclosed (emptied by `close`, so that it never closes a number reused since)
    _open_fds: list[int] = field(default_factory=list)
    _finalizer: weakref.finalize[[list[int], Path, int], ChromiumProcess] | None = None
    _from_browser: asyncio.StreamReader | None = None
    _reader_transport: asyncio.ReadTransport | None = None
    _ids: int = 0

    @property
    def profile(self) -> Path:
        return self.folder / PROFILE_DIR

    @property
    def log_path(self) -> Path:
        return self.folder / LOG_FILE

    @classmethod
    async def start(cls, executable: str | Path, args: list[str], timeout_s: float) -> ChromiumProcess:
        """Start `executable` headless with `args` and wait until it answers over its pipe."""
        resolved = shutil.which(str(executable))
        if resolved is None:
            raise DeviceError(f"no Chromium at {executable}", hint="install it, or set REALBENCH_CHROMIUM")
        sweep_abandoned()
        folder = Path(tempfile.mkdtemp(prefix=FOLDER_PREFIX))
        (folder / OWNER_FILE).write_text(f"{os.getpid()} {_process_start(os.getpid())}")
        (folder / PROFILE_DIR).mkdir()
        browser_reads, to_browser = os.pipe()
        from_browser, browser_writes = os.pipe()
        browser_reads, browser_writes = _high_fd(browser_reads), _high_fd(browser_writes)
        argv = command_line(resolved, args, folder / PROFILE_DIR)
        try:
            pid = os.posix_spawn(
                resolved,
                argv,
                os.environ,
                file_actions=[
                    (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                    (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
                    (os.POSIX_SPAWN_OPEN, 2, str(folder / LOG_FILE), os.O_WRONLY | os.O_CREAT, 0o600),
                    (os.POSIX_SPAWN_DUP2, browser_reads, BROWSER_READS_FD),
                    (os.POSIX_SPAWN_DUP2, browser_writes, BROWSER_WRITES_FD),
                ],
                setsid=True,
            )
        except OSError as exc:
            _close_fds([to_browser, from_browser])  # the browser's ends: below, either way
            shutil.rmtree(folder, ignore_errors=True)
            raise DeviceError(f"Chromium at {resolved} did not start: {exc}") from None
        finally:
            _close_fds([browser_reads, browser_writes])
        browser = cls(pid, folder, _open_fds=[to_browser])
        # dropped unclosed (or left open at exit): its pipe closes and the browser exits with it
        browser._finalizer = weakref.finalize(browser, _abandoned, browser._open_fds, folder, pid)
        try:
            await browser._read_from(from_browser)  # from here its transport owns the descriptor
            browser._watch_exit()
            reply = await asyncio.wait_for(browser._ask("Browser.getVersion"), timeout_s)
        except BaseException as exc:
            tail = browser.log_tail()
            await browser.close(timeout_s=0)  # it did not answer: nothing to ask it
            if isinstance(exc, TimeoutError):
                raise DeviceError(
                    f"Chromium at {resolved} did not answer within {timeout_s:.0f} s{tail}"
                ) from None
            if isinstance(exc, DeviceError):
                raise DeviceError(f"{exc.message}{tail}", hint="run it by hand to see why") from None
            raise
        browser.version = str(reply.get("product", "")).rpartition("/")[2]
        log.debug("Chromium %s started as %d", browser.version, pid)
        return browser

    def _watch_exit(self) -> None:
        loop = asyncio.get_running_loop()
        pidfd = os.pidfd_open(self.pid)

        def reap() -> None:
            loop.remove_reader(pidfd)
            os.close(pidfd)
            # whatever the browser left of its children (its zygote, renderers) goes too; before the
            # wait, while its pid (the group's id) cannot yet be given to another process
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
            try:
                code = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
            except ChildProcessError:  # waited for by `_abandoned` at the interpreter's exit
                code = UNKNOWN_EXIT
            if not self.exited.done():
                self.exited.set_result(code)

        loop.add_reader(pidfd, reap)

    async def _read_from(self, fd: int) -> None:
        reader = asyncio.StreamReader(limit=1 << 24)
        pipe = os.fdopen(fd, "rb", buffering=0)
        try:
            transport, _ = await asyncio.get_running_loop().connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), pipe
            )
        except BaseException:
            pipe.close()
            raise
        self._from_browser, self._reader_transport = reader, transport

    async def _ask(self, method: str) -> dict[str, Any]:
        """Send `method` over the pipe and return its result (messages end with a NUL byte)."""
        if self._from_browser is None or not self._open_fds:
            raise DeviceError("the browser's pipe is closed")
        self._ids += 1
        ident = self._ids
        try:
            os.write(self._open_fds[0], json.dumps({"id": ident, "method": method}).encode() + b"\0")
        except OSError as exc:
            raise DeviceError(f"the browser closed its pipe ({exc.strerror})") from None
        while True:
            try:
                raw = await self._from_browser.readuntil(b"\0")
            except asyncio.IncompleteReadError:
                raise DeviceError("the browser exited before it answered") from None
            message = json.loads(raw[:-1])
            if message.get("id") == ident:
                if "error" in message:
                    raise DeviceError(f"the browser refused {method}: {message['error']}")
                return dict(message.get("result", {}))

    def log_tail(self) -> str:
        """The last lines the browser wrote to its standard error, for an error message."""
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        tail = [line for line in lines if line.strip()][-LOG_TAIL_LINES:]
        return (":\n" + "\n".join(tail)) if tail else ""

    async def devtools_url(self, timeout_s: float = PORT_FILE_WAIT_S) -> str:
        """The browser's DevTools websocket URL, from the port file Chromium writes once it listens."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while (url := devtools_endpoint(self.profile)) is None:
            if self.exited.done():
                raise DeviceError(f"the browser exited ({self.exited.result()}){self.log_tail()}")
            if asyncio.get_running_loop().time() >= deadline:
                raise DeviceError(f"the browser wrote no DevTools port within {timeout_s:.0f} s")
            await asyncio.sleep(0.02)
        return url

    async def close(self, timeout_s: float = CLOSE_WAIT_S) -> None:
        """Ask the browser to close (within `timeout_s`; 0: do not ask), kill its process group if
        it has not exited by then, and remove its folder."""

        async def asked() -> None:
            with contextlib.suppress(DeviceError):  # it may be exiting already
                await self._ask("Browser.close")
            await asyncio.shield(self.exited)

        if timeout_s > 0 and not self.exited.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asked(), timeout_s)
        if not self.exited.done():
            # not yet waited for, so the group's id is still this browser's
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
            try:
                await asyncio.wait_for(asyncio.shield(self.exited), KILL_WAIT_S)
            except TimeoutError:
                log.warning("Chromium %d did not exit after SIGKILL", self.pid)
        if self._reader_transport is not None:
            self._reader_transport.close()
        self._from_browser = self._reader_transport = None
        _close_fds(self._open_fds)
        self._open_fds.clear()
        shutil.rmtree(self.folder, ignore_errors=True)
        if self._finalizer is not None:
            self._finalizer.detach()
