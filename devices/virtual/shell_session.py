"""A `shell:` stream that needs more than one-shot commands: `sh FILE ARGS` scripts with background
jobs, `read` from the stream, `kill -INT`, `wait`, and a foreground `screenrecord`.

This is what adbutils' recorder sends: it pushes a script that starts `screenrecord "$1" &`,
reads a line from stdin, sends the recorder SIGINT and waits, and it holds the stream open until
then. Everything else in a script line goes to the phone's one-shot shell (devices/virtual/shell.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from devices.virtual.screenrecord import record_screen
from devices.virtual.shell import Result, fail, split_commands

if TYPE_CHECKING:
    from devices.virtual.adb_transport import AdbStream
    from devices.virtual.phone import VirtualPhone

FIRST_JOB_PID = 4200
VARIABLE = re.compile(r"\$(\{?)([A-Za-z_][A-Za-z0-9_]*|[0-9!?#])(\}?)")
INTERRUPTS = {"-INT", "-2", "-SIGINT", "-TERM", "-15", "-SIGTERM", "-KILL", "-9", "-SIGKILL"}


def handles(line: str) -> bool:
    """Whether a `shell:` line needs a session (stdin, jobs) rather than the one-shot shell."""
    parts = split_commands(line)
    return len(parts) == 1 and parts[0][1][0].rsplit("/", 1)[-1] in ("sh", "screenrecord")


@dataclass
class _Job:
    task: asyncio.Task[Result]
    interrupt: asyncio.Event = field(default_factory=asyncio.Event)


class ShellSession:
    def __init__(self, phone: VirtualPhone, stream: AdbStream) -> None:
        self.phone = phone
        self.stream = stream
        self.vars: dict[str, str] = {"?": "0"}
        self.jobs: dict[int, _Job] = {}
        self._next_pid = FIRST_JOB_PID

    async def run(self, line: str) -> bytes:
        argv = shlex.split(line)
        name = argv[0].rsplit("/", 1)[-1]
        if name == "screenrecord":
            # In the foreground the host stops it by closing the stream (adb's Ctrl-C).
            stop = asyncio.Event()
            watcher = asyncio.ensure_future(self._stop_on_eof(stop))
            try:
                return (await record_screen(self.phone, argv[1:], stop)).output
            finally:
                watcher.cancel()
        return await self._script(argv[1:])

    async def _stop_on_eof(self, stop: asyncio.Event) -> None:
        await self.stream.wait_closed_by_peer()
        stop.set()

    async def _script(self, args: list[str]) -> bytes:
        if not args:
            return b""  # an interactive shell: nothing to run
        if args[0] == "-c":
            return await self.phone.shell.run(" ".join(args[1:2]))
        entry = self.phone.fs.get(args[0])
        if entry is None:
            return f"sh: {args[0]}: No such file or directory\n".encode()
        for index, value in enumerate(args, start=0):
            self.vars[str(index)] = value
        self.vars["#"] = str(len(args) - 1)
        out = bytearray()
        try:
            for raw in entry.data.decode("utf-8", errors="replace").splitlines():
                line = raw.strip()
                if not line or line.startswith("#"):
                    continue
                out += await self._line(line)
        finally:
            await self._end_jobs()
        return bytes(out)

    def _expand(self, line: str) -> str:
        def value(match: re.Match[str]) -> str:
            return self.vars.get(match.group(2), "")

        return VARIABLE.sub(value, line)

    async def _line(self, line: str) -> bytes:
        background = line.endswith("&") and not line.endswith("&&")
        text = self._expand(line[:-1] if background else line)
        argv = shlex.split(text)
        if not argv:
            return b""
        if len(argv) == 1 and "=" in argv[0] and argv[0].split("=", 1)[0].isidentifier():
            key, value = argv[0].split("=", 1)
            self.vars[key] = value
            return b""
        if background:
            self._start_job(argv)
            return b""
        builtins: dict[str, Callable[[list[str]], Awaitable[Result]]] = {
            "read": self._read,
            "kill": self._kill,
            "wait": self._wait,
        }
        builtin = builtins.get(argv[0])
        if builtin is not None:
            result = await builtin(argv[1:])
            self.vars["?"] = str(result.rc)
            return result.output
        output = await self.phone.shell.run(text)
        return output

    def _start_job(self, argv: list[str]) -> None:
        pid = self._next_pid
        self._next_pid += 1
        interrupt = asyncio.Event()
        if argv[0].rsplit("/", 1)[-1] == "screenrecord":
            coro: Awaitable[Result] = record_screen(self.phone, argv[1:], interrupt)
        else:
            coro = self._one_shot(shlex.join(argv))
        self.jobs[pid] = _Job(asyncio.ensure_future(coro), interrupt)
        self.vars["!"] = str(pid)

    async def _one_shot(self, line: str) -> Result:
        return Result(await self.phone.shell.run(line))

    async def _read(self, args: list[str]) -> Result:
        line = await self.stream.reader.readline()
        if args:
            self.vars[args[0]] = line.decode("utf-8", errors="replace").rstrip("\n")
        return Result(rc=0 if line else 1)

    async def _kill(self, args: list[str]) -> Result:
        out, rc = [], 0
        for word in args:
            if word in INTERRUPTS or word == "-s":
                continue
            job = self.jobs.get(int(word)) if word.isdigit() else None
            if job is None or job.task.done():
                out.append(f"kill: {word}: No such process\n")
                rc = 1
            else:
                job.interrupt.set()
        return Result("".join(out).encode(), rc)

    async def _wait(self, args: list[str]) -> Result:
        rc = 0
        for pid, job in list(self.jobs.items()):
            if not args or str(pid) in args:
                result = await job.task
                rc = result.rc
        return Result(rc=rc)

    async def _end_jobs(self) -> None:
        """The script ended (or its stream went): its jobs get SIGHUP, as a shell's would."""
        for job in self.jobs.values():
            job.interrupt.set()
        for job in self.jobs.values():
            with contextlib.suppress(Exception):
                await job.task


async def serve_session(phone: VirtualPhone, stream: AdbStream, line: str) -> None:
    try:
        output = await ShellSession(phone, stream).run(line)
    except Exception as exc:  # a session failing must not take the connection down
        output = fail(f"sh: error: {exc}\n").output
    if output and not stream.closed:
        await stream.write(output)
