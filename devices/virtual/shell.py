"""`shell:` — a tiny Android shell: the commands adbutils and uiautomator2 send, over an in-memory FS.

Command lines are split like sh does (quotes, `;`, `&&`, `||`, `$?`), so adbutils' `shell2` suffix
`; echo X4EXIT:$?` works. The long-lived uiautomator launch (`app_process … com.wetest.uia2.Main`)
is handled by the phone, not here. Output is v1 raw: stdout and stderr merged, LF line ends.
"""

from __future__ import annotations

import hashlib
import logging
import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from devices.virtual.model import LAUNCHER_PACKAGE, InputSource
from devices.virtual.phone_ui import PhoneUI

if TYPE_CHECKING:
    from devices.virtual.phone import VirtualPhone

log = logging.getLogger(__name__)
OPERATORS = (";", "&&", "||", "&", "|")


@dataclass
class Result:
    output: bytes = b""
    rc: int = 0


def ok(text: str = "") -> Result:
    return Result(text.encode())


def fail(text: str, rc: int = 1) -> Result:
    return Result(text.encode(), rc)


def split_commands(line: str) -> list[tuple[str, list[str]]]:
    """[(operator before, argv), ...]; the first operator is ';'."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = ""
    out: list[tuple[str, list[str]]] = []
    op = ";"
    argv: list[str] = []
    for token in lexer:
        if token in OPERATORS:
            if argv:
                out.append((op, argv))
            op, argv = token, []
        else:
            argv.append(token)
    if argv:
        out.append((op, argv))
    return out


def strip_env(argv: list[str]) -> tuple[dict[str, str], list[str]]:
    env: dict[str, str] = {}
    i = 0
    while i < len(argv) and "=" in argv[i] and argv[i].split("=", 1)[0].isidentifier():
        key, value = argv[i].split("=", 1)
        env[key] = value
        i += 1
    return env, argv[i:]


def is_uiautomator_launch(line: str) -> bool:
    return "app_process" in line and "com.wetest.uia2.Main" in line


Command = Callable[[list[str]], Awaitable[Result]]


class Shell:
    def __init__(self, phone: VirtualPhone) -> None:
        self.phone = phone
        self.commands: dict[str, Command] = {
            "echo": self._echo,
            "toybox": self._toybox,
            "md5sum": self._md5sum,
            "md5": self._md5sum,
            "wm": self._wm,
            "dumpsys": self._dumpsys,
            "ime": self._ime,
            "settings": self._settings,
            "monkey": self._monkey,
            "am": self._am,
            "pm": self._pm,
            "getprop": self._getprop,
            "screencap": self._screencap,
            "input": self._input,
            "df": self._df,
            "ps": self._ps,
            "pidof": self._pidof,
            "ls": self._ls,
            "cat": self._cat,
            "rm": self._rm,
            "mkdir": self._mkdir,
            "chmod": self._noop,
            "true": self._noop,
            "sync": self._noop,
            "false": self._false,
            "which": self._which,
            "screenrecord": self._screenrecord,
        }

    async def run(self, line: str) -> bytes:
        out = bytearray()
        rc = 0
        for op, raw_argv in split_commands(line):
            if (op == "&&" and rc != 0) or (op == "||" and rc == 0):
                continue
            argv = [word.replace("$?", str(rc)) for word in raw_argv]
            _env, argv = strip_env(argv)
            if not argv:
                continue
            handler = self.commands.get(argv[0].rsplit("/", 1)[-1])
            if handler is None:
                result = fail(f"/system/bin/sh: {argv[0]}: inaccessible or not found\n", 127)
            else:
                try:
                    result = await handler(argv[1:])
                except Exception as exc:  # an app screen failing must not kill the shell stream
                    log.warning("shell %r failed: %s", argv[0], exc)
                    result = fail(f"{argv[0]}: error: {exc}\n", 1)
            out += result.output
            rc = result.rc
        return bytes(out)

    @property
    def ui(self) -> PhoneUI:
        return self.phone.ui

    # --- commands ------------------------------------------------------------------------------

    async def _noop(self, args: list[str]) -> Result:
        return ok()

    async def _false(self, args: list[str]) -> Result:
        return Result(rc=1)

    async def _which(self, args: list[str]) -> Result:
        # `sh` scripts run in a stream session (devices/virtual/shell_session.py)
        known = [a for a in args if a in self.commands or a == "sh"]
        return Result(
            "".join(f"/system/bin/{a}\n" for a in known).encode(), 0 if len(known) == len(args) else 1
        )

    async def _screenrecord(self, args: list[str]) -> Result:
        """Inside a one-shot command line nothing can interrupt it: it runs to its time limit."""
        import asyncio

        from devices.virtual.screenrecord import record_screen

        return await record_screen(self.phone, args, asyncio.Event())

    async def _echo(self, args: list[str]) -> Result:
        if args[:1] == ["-n"]:
            return ok(" ".join(args[1:]))
        return ok(" ".join(args) + "\n")

    async def _toybox(self, args: list[str]) -> Result:
        if not args:
            return fail("usage: toybox COMMAND\n")
        handler = self.commands.get(args[0])
        if handler is None:
            return fail(f"toybox: Unknown command {args[0]}\n")
        return await handler(args[1:])

    async def _md5sum(self, args: list[str]) -> Result:
        out, rc = [], 0
        for path in (a for a in args if not a.startswith("-")):
            entry = self.phone.fs.get(path)
            if entry is None:
                out.append(f"md5sum: {path}: No such file or directory\n")
                rc = 1
            else:
                out.append(f"{hashlib.md5(entry.data).hexdigest()}  {path}\n")
        return Result("".join(out).encode(), rc)

    async def _wm(self, args: list[str]) -> Result:
        ident = self.phone.spec.identity
        if args[:1] == ["size"]:
            return ok(f"Physical size: {ident.width}x{ident.height}\n")
        if args[:1] == ["density"]:
            return ok(f"Physical density: {ident.density}\n")
        if args[:1] == ["dismiss-keyguard"]:
            await self.phone.ui_call(setattr, self.ui.faults, "locked", False)
            return ok()
        return fail("Error: unknown wm command\n", 255)

    async def _dumpsys(self, args: list[str]) -> Result:
        ident = self.phone.spec.identity
        what = args[0] if args else ""
        if what == "display":
            return ok(
                "DISPLAY MANAGER (dumpsys display)\n"
                "  mViewports=[DisplayViewport{type=INTERNAL, valid=true, isActive=true, displayId=0, "
                f"uniqueId='local:0', physicalPort=0, orientation=0, logicalFrame=Rect(0, 0 - {ident.width}, {ident.height}), "
                f"physicalFrame=Rect(0, 0 - {ident.width}, {ident.height}), deviceWidth={ident.width}, deviceHeight={ident.height}}}]\n"
                f"  mDefaultDisplayDensity={ident.density}\n"
            )
        if what == "window":
            return await self._dumpsys_window()
        if what == "activity":
            pkg, activity = await self.phone.ui_call(self._focus)
            short = _short_name(pkg, activity)
            if args[1:2] == ["top"]:
                return ok(f"TASK 12 id=12\n  ACTIVITY {pkg}/{short} 9c2d1a pid={self.phone.pid_of(pkg)}\n")
            return ok(f"  mResumedActivity: ActivityRecord{{9c2d1a u0 {pkg}/{short} t12}}\n")
        if what == "power":
            on = await self.phone.ui_call(lambda: self.ui.screen_on)
            return ok(
                f"  mWakefulness={'Awake' if on else 'Asleep'}\n  Display Power: state={'ON' if on else 'OFF'}\n"
            )
        if what == "package" and len(args) > 1:
            return self._dumpsys_package(args[1])
        if what == "input_method":
            return ok(f"  mCurMethodId={self.phone.ime_current}\n  mInputShown=false\n")
        return ok()

    async def _dumpsys_window(self) -> Result:
        pkg, activity = await self.phone.ui_call(self._focus)
        faults = self.ui.faults
        locked = "true" if faults.locked else "false"
        keyguard = f"  mShowingLockscreen={locked} mShowingDream=false mDreamingLockscreen={locked}\n"
        if faults.locked:
            focus = "NotificationShade"
        elif faults.anr and pkg != LAUNCHER_PACKAGE:
            focus = f"Application Not Responding: {pkg}"
        else:
            focus = f"{pkg}/{activity}"
        # A window's title is the full class name; an activity record prints the short form.
        return ok(
            f"  mCurrentFocus=Window{{4b1e2f0 u0 {focus}}}\n"
            f"  mFocusedApp=ActivityRecord{{9c2d1a u0 {pkg}/{_short_name(pkg, activity)} t12}}\n" + keyguard
        )

    def _focus(self) -> tuple[str, str]:
        return self.ui.foreground, self.ui.activity()

    def _dumpsys_package(self, package: str) -> Result:
        version = self.phone.app_version(package)
        if version is None:
            return ok(f"Unable to find package: {package}\n")
        code = sum(int(p) * 100 ** (3 - i) for i, p in enumerate(version.split(".")[:4]) if p.isdigit())
        return ok(
            "Packages:\n"
            f"  Package [{package}] (4f3a2b1):\n"
            f"    userId=10{abs(hash(package)) % 900 + 100}\n"
            f"    codePath=/data/app/{package}-1\n"
            f"    versionCode={code} minSdk=24 targetSdk=33\n"
            f"    versionName={version}\n"
            "    pkgFlags=[ HAS_CODE ALLOW_CLEAR_USER_DATA ]\n"
            "    firstInstallTime=2026-01-05 10:00:00\n"
            "    lastUpdateTime=2026-01-05 10:00:00\n"
            "    signatures=PackageSignatures{8e1d2c3 version:3, signatures:[5a1b2c3d], past signatures:[]}\n"
        )

    async def _ime(self, args: list[str]) -> Result:
        if args[:1] == ["list"]:
            return ok("".join(f"{ime}\n" for ime in self.phone.imes))
        if args[:1] in (["set"], ["enable"]) and len(args) > 1:
            ime = args[1]
            if ime not in self.phone.imes:
                return fail(
                    f"Unknown input method {ime} cannot be {'selected' if args[0] == 'set' else 'enabled'} for user #0\n",
                    255,
                )
            if args[0] == "set":
                self.phone.ime_current = ime
                return ok(f"Input method {ime} selected for user #0\n")
            return ok(f"Input method {ime}: already enabled for user #0\n")
        if args[:1] == ["disable"]:
            return ok()
        return fail("ime: unknown command\n", 255)

    async def _settings(self, args: list[str]) -> Result:
        if len(args) >= 3 and args[0] in ("get", "put"):
            namespace, key = args[1], args[2]
            if (namespace, key) == ("secure", "default_input_method"):
                if args[0] == "get":
                    return ok(self.phone.ime_current + "\n")
                if len(args) > 3:
                    self.phone.ime_current = args[3]
                return ok()
            if args[0] == "get":
                return ok(self.phone.settings.get((namespace, key), "null") + "\n")
            if len(args) > 3:
                self.phone.settings[(namespace, key)] = args[3]
            return ok()
        return fail("settings: invalid arguments\n", 255)

    async def _monkey(self, args: list[str]) -> Result:
        package = args[args.index("-p") + 1] if "-p" in args and args.index("-p") + 1 < len(args) else None
        if package is None:
            return fail("** Error: no package given\n", 1)
        started = await self.phone.ui_call(self.ui.start_app, package)
        if not started:
            return fail("  bash arg: -p\n** No activities found to run, monkey aborted.\n", 251)
        return ok(
            "  bash arg: -p\n  bash arg: "
            + package
            + "\nEvents injected: 1\n## Network stats: elapsed time=12ms (0ms mobile, 0ms wifi, 12ms not connected)\n"
        )

    async def _am(self, args: list[str]) -> Result:
        if not args:
            return fail("am: missing command\n", 255)
        sub, rest = args[0], args[1:]
        if sub == "force-stop" and rest:
            await self.phone.ui_call(self.ui.stop_app, rest[-1])
            return ok()
        if sub in ("start", "start-activity"):
            return await self._am_start(rest)
        if sub == "broadcast":
            action = rest[rest.index("-a") + 1] if "-a" in rest and rest.index("-a") + 1 < len(rest) else ""
            return ok(
                f"Broadcasting: Intent {{ act={action} flg=0x400000 }}\nBroadcast completed: result=0\n"
            )
        return fail(f"Error: unknown am command '{sub}'\n", 255)

    async def _am_start(self, args: list[str]) -> Result:
        component = args[args.index("-n") + 1] if "-n" in args and args.index("-n") + 1 < len(args) else None
        url = args[args.index("-d") + 1] if "-d" in args and args.index("-d") + 1 < len(args) else None
        if component:
            package = component.split("/", 1)[0]
            started = await self.phone.ui_call(self.ui.start_app, package)
        elif url:
            package = self.phone.browser_package
            self.phone.browser_url = url
            started = await self.phone.ui_call(self.ui.open_url, package, url)
        else:
            return fail("Error: Activity not started, unable to resolve Intent\n", 1)
        if not started:
            return fail(f"Error: Activity class {{{component}}} does not exist.\n", 1)
        return ok(f"Starting: Intent {{ cmp={component or package} }}\n")

    async def _pm(self, args: list[str]) -> Result:
        sub, rest = (args[0], args[1:]) if args else ("", [])
        if sub == "clear" and rest:
            cleared = await self.phone.ui_call(self.ui.clear_app, rest[-1])
            return ok("Success\n") if cleared else fail("Failed\n", 1)
        if sub == "list" and rest[:1] == ["packages"]:
            flags = [a for a in rest[1:] if a.startswith("-")]
            needle = next((a for a in rest[1:] if not a.startswith("-")), "")
            packages = self.phone.packages(third_party="-3" in flags)
            return ok("".join(f"package:{p}\n" for p in packages if needle in p))
        if sub == "path" and rest:
            if self.phone.app_version(rest[-1]) is None:
                return Result(rc=1)
            return ok(f"package:/data/app/{rest[-1]}-1/base.apk\n")
        if sub in ("grant", "revoke"):
            return ok()
        if sub == "uninstall":
            return fail("Failure [DELETE_FAILED_INTERNAL_ERROR]\n", 1)
        return fail(f"Error: unknown pm command '{sub}'\n", 255)

    async def _getprop(self, args: list[str]) -> Result:
        props = self.phone.props()
        if not args:
            return ok("".join(f"[{k}]: [{v}]\n" for k, v in sorted(props.items())))
        return ok(props.get(args[0], args[1] if len(args) > 1 else "") + "\n")

    async def _screencap(self, args: list[str]) -> Result:
        await self.phone.screenshot_delay()
        return Result(await self.phone.ui_call(self.ui.png))

    async def _input(self, args: list[str]) -> Result:
        ui = self.ui
        src = InputSource.SHELL
        sub, rest = (args[0], args[1:]) if args else ("", [])
        try:
            if sub == "tap" and len(rest) >= 2:
                x, y = int(float(rest[0])), int(float(rest[1]))
                await self.phone.input_call(ui.tap, x, y, src, "input tap")
            elif sub in ("swipe", "draganddrop") and len(rest) >= 4:
                x1, y1, x2, y2 = (int(float(v)) for v in rest[:4])
                ms = int(rest[4]) if len(rest) > 4 else 300
                if (x1, y1) == (x2, y2):
                    await self.phone.input_call(
                        ui.tap, x1, y1, src, f"input {sub}", ms if ms >= 500 else None
                    )
                else:
                    await self.phone.input_call(ui.swipe, x1, y1, x2, y2, ms, src, f"input {sub}")
            elif sub == "text" and rest:
                text = " ".join(rest).replace("%s", " ")
                await self.phone.input_call(ui.text, text, src, "input text")
            elif sub == "keyevent" and rest:
                for key in (k for k in rest if not k.startswith("--")):
                    await self.phone.input_call(ui.key, key, src, "input keyevent")
            else:
                return fail("Usage: input [<source>] <command> [<arg>...]\n", 1)
        except ValueError:
            return fail(f"Error: invalid arguments for input {sub}\n", 1)
        return ok()

    async def _df(self, args: list[str]) -> Result:
        total_k = 115_000_000
        free_k = self.phone.free_storage_kb
        used = total_k - free_k
        pct = round(100 * used / total_k)
        return ok(
            "Filesystem      1K-blocks     Used Available Use% Mounted on\n"
            f"/dev/block/dm-5 {total_k} {used} {free_k} {pct}% /data\n"
        )

    async def _ps(self, args: list[str]) -> Result:
        lines = ["USER           PID  PPID     VSZ    RSS WCHAN            ADDR S NAME"]
        lines.append("root             1     0 10929596 12800 0                   0 S init")
        for pkg in await self.phone.ui_call(lambda: list(self.ui.running)):
            lines.append(
                f"u0_a123      {self.phone.pid_of(pkg):5d}   700 15427836 198412 0                   0 S {pkg}"
            )
        return ok("\n".join(lines) + "\n")

    async def _pidof(self, args: list[str]) -> Result:
        running = await self.phone.ui_call(lambda: list(self.ui.running))
        pids = [str(self.phone.pid_of(p)) for p in args if p in running]
        return ok(" ".join(pids) + "\n") if pids else Result(rc=1)

    async def _ls(self, args: list[str]) -> Result:
        paths = [a for a in args if not a.startswith("-")] or ["/"]
        out, rc = [], 0
        for path in paths:
            if self.phone.fs.is_dir(path):
                out += [f"{name}\n" for name in self.phone.fs.listdir(path)]
            elif self.phone.fs.get(path) is not None:
                out.append(f"{path}\n")
            else:
                out.append(f"ls: {path}: No such file or directory\n")
                rc = 1
        return Result("".join(out).encode(), rc)

    async def _cat(self, args: list[str]) -> Result:
        out, rc = bytearray(), 0
        for path in args:
            entry = self.phone.fs.get(path)
            if entry is None:
                out += f"cat: {path}: No such file or directory\n".encode()
                rc = 1
            else:
                out += entry.data
        return Result(bytes(out), rc)

    async def _rm(self, args: list[str]) -> Result:
        force = any(a.startswith("-") and "f" in a for a in args)
        rc, out = 0, []
        for path in (a for a in args if not a.startswith("-")):
            if not self.phone.fs.remove(path) and not force:
                out.append(f"rm: {path}: No such file or directory\n")
                rc = 1
        return Result("".join(out).encode(), rc)

    async def _mkdir(self, args: list[str]) -> Result:
        for path in (a for a in args if not a.startswith("-")):
            self.phone.fs.mkdir(path)
        return ok()


def _short_name(package: str, activity: str) -> str:
    """`ComponentName.flattenToShortString`: `.Name` for a class inside the package."""
    return activity[len(package) :] if activity.startswith(package + ".") else activity
