"""Errors of the RL environment layer, and their plain-data form for crossing process boundaries."""

from __future__ import annotations

from dataclasses import dataclass

from realbench import errors as core_errors
from realbench.errors import CloneError, ConfigError, DeviceLost, RealbenchError
from realbench.http_guard import LimitExceeded


class EnvNotFound(RealbenchError):
    """An environment id that is unknown here, or that was closed."""

    http_status = 404


class EpisodeOver(RealbenchError):
    """A step on an environment whose episode has ended (or was never started)."""

    http_status = 409


class SnapshotMismatch(CloneError):
    """A snapshot restored into an environment of another clone or task pack."""

    http_status = 400


class WorkerLost(DeviceLost):
    """An environment worker (process, Ray actor) died; its environments' episodes are aborted."""


class PackNotAllowed(ConfigError):
    """A client named a pack outside the registered packs and the allow-listed folders."""

    http_status = 403


_LOCAL: dict[str, type[RealbenchError]] = {
    cls.__name__: cls
    for cls in (EnvNotFound, EpisodeOver, SnapshotMismatch, WorkerLost, PackNotAllowed, LimitExceeded)
}


def error_class(name: str) -> type[RealbenchError]:
    """The RealbenchError subclass called `name` (a plain RealbenchError when unknown here)."""
    if name in _LOCAL:
        return _LOCAL[name]
    cls = getattr(core_errors, name, None)
    if isinstance(cls, type) and issubclass(cls, RealbenchError):
        return cls
    return RealbenchError


def http_status(exc: RealbenchError) -> int:
    return int(getattr(exc, "http_status", 400))


@dataclass(frozen=True)
class ErrorInfo:
    """A RealbenchError as data: its class name, message and hint (pickles and serialises to JSON)."""

    type: str
    message: str
    hint: str | None = None

    @classmethod
    def of(cls, exc: RealbenchError) -> ErrorInfo:
        return cls(type=type(exc).__name__, message=exc.message, hint=exc.hint)

    def to_exception(self) -> RealbenchError:
        """Rebuild the error as its own class; constructors differ, so only the base initialiser runs."""
        kind = error_class(self.type)
        exc = kind.__new__(kind)
        RealbenchError.__init__(exc, self.message, hint=self.hint)
        return exc

    def to_json(self) -> dict[str, str | None]:
        return {"error": self.message, "type": self.type, "hint": self.hint}
