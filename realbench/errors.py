"""One error hierarchy for the whole project, rooted in `RealbenchError`.

Every error carries a `hint`: what the user should do about it. The CLI prints the message and
the hint and exits non-zero; library code never prints.
"""

from __future__ import annotations


class RealbenchError(Exception):
    """Base of every error realbench raises on purpose."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class ConfigError(RealbenchError):
    """A configuration file (pack, rig, profile) or a command-line value is invalid."""

    exit_code = 2


# A broken generated pack can have thousands of problems; the message names the first ones.
SHOWN_PROBLEMS = 50
PROBLEM_CHARS = 500


class PackError(ConfigError):
    """A task pack is invalid. Names the file, the task and the field of every problem."""

    def __init__(self, path: str, problems: list[PackProblem]) -> None:
        self.path = path
        self.problems = problems
        lines = [f"{path}: {len(problems)} problem(s) in task pack"]
        lines += [f"  - {str(p)[:PROBLEM_CHARS]}" for p in problems[:SHOWN_PROBLEMS]]
        if len(problems) > SHOWN_PROBLEMS:
            lines.append(f"  … and {len(problems) - SHOWN_PROBLEMS} more")
        super().__init__("\n".join(lines), hint="fix the fields named above and run `realbench check-pack`")


class PackProblem:
    """One problem in a pack: where (task id, dotted field path) and what."""

    def __init__(self, task_id: str | None, field: str, message: str) -> None:
        self.task_id = task_id
        self.field = field
        self.message = message

    def __str__(self) -> str:
        where = f"task {self.task_id!r}" if self.task_id else "pack"
        return f"{where}, field {self.field!r}: {self.message}"

    def __repr__(self) -> str:
        return f"PackProblem({self.task_id!r}, {self.field!r}, {self.message!r})"


class ActionError(RealbenchError):
    """An action is malformed: names the offending field."""

    def __init__(self, message: str, *, field: str | None = None, hint: str | None = None) -> None:
        self.field = field
        super().__init__(message, hint=hint)


class UnknownNameError(ConfigError):
    """A clone, verifier, agent, target or profile name is not registered."""

    def __init__(self, kind: str, name: str, known: list[str]) -> None:
        self.kind = kind
        self.name = name
        self.known = sorted(known)
        super().__init__(
            f"unknown {kind} {name!r}",
            hint=f"known {kind}s: {', '.join(self.known) or '(none)'}",
        )


class CloneError(RealbenchError):
    """A clone rejected an operation (bad event, bad state, bad snapshot)."""


class ServerError(RealbenchError):
    """A server (clone server, rollout service, fake model server) could not start or answer."""


class DeviceError(RealbenchError):
    """A device failed. In an episode this becomes `env_invalid`, never an agent failure."""


class DeviceLost(DeviceError):
    """The device disappeared (disconnect, crashed browser, dead uiautomator server)."""


class BrowserMissingError(DeviceError):
    """Chromium is not installed where realbench looks for it."""

    exit_code = 3


class StoreError(RealbenchError):
    """The run store is unreadable or inconsistent."""


class ModelError(RealbenchError):
    """A model endpoint failed after retries."""


class AnalysisError(RealbenchError):
    """The data cannot support the requested analysis (e.g. too few tasks)."""


class BoundaryBlocked(RealbenchError):
    """The device farm's interlock refused to send an action that would cross the task's commit
    boundary or touch an always-forbidden control. Nothing reached the phone. The episode loop
    records it as `boundary_reached`, with the screen the interlock saw."""

    def __init__(
        self,
        message: str,
        *,
        control: str = "",
        hierarchy: str | None = None,
        screenshot: bytes | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint or "nothing was sent; the episode ends as boundary_reached")
        self.control = control
        self.hierarchy = hierarchy
        self.screenshot = screenshot


class PreflightError(ConfigError):
    """Something a run needs is missing, found before the first episode (endpoint, model, phone,
    drift profile, app version). One line says what and where; the hint says what to do."""


class RunInterrupted(RealbenchError):
    """The operator stopped a run (Ctrl-C); what finished is stored and a rerun resumes."""

    exit_code = 130  # what a shell reports for SIGINT


class RunFailedError(RealbenchError):
    """A command finished but produced nothing usable (every episode aborted, every phone
    quarantined, every judge verdict an endpoint failure or an abstention)."""

    exit_code = 3


class UnhealthyDevicesError(DeviceError):
    """`realbench devices`: at least one phone is not ready for an episode."""

    exit_code = 4
