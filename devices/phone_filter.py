"""Which tasks `realbench select` may put in the phone sample: the ones a real run would start.

A real run skips a task its pack does not allow on a real account (`realbench.real_allowed`) and,
under `--certified`, a task certified on no phone. Selecting such a task spends device budget on
nothing and can leave a stratum (even the signal stratum) thinner than planned, so selection leaves
them out up front with the same reasons the run would give.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from realbench.errors import ConfigError, RealbenchError
from realbench.real_allowed import real_exclusions
from realbench.taskpack import load_pack

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PhoneFilter:
    """task → why the phones may not run it, and what decided that (for the selection's record)."""

    excluded: dict[str, str] = field(default_factory=dict)
    source: str = ""


def certified_exclusions(cert_path: Path, task_ids: list[str]) -> dict[str, str]:
    """task → why it is certified on no phone of the certificate (at the app version certified)."""
    from devices.certify import load_certificate

    cert = load_certificate(cert_path)
    out: dict[str, str] = {}
    for task in task_ids:
        if any(task in cert.certified_for(p.serial, p.app_version) for p in cert.phones):
            continue
        why = "; ".join(
            f"{p.serial}: {cert.why_not_certified(p.serial, p.app_version, task)}" for p in cert.phones
        )
        out[task] = f"not certified on any phone: {why or 'the certificate lists no phone'}"
    return out


def recorded_pack(stores: list[Path]) -> Path | None:
    """The pack the clone runs of these stores recorded (the first that still exists)."""
    from realbench.store import RunStore

    for folder in stores:
        if not (folder / "index.sqlite").exists():
            continue
        try:
            with RunStore(folder, create=False, check=False) as store:
                runs = store.runs()
        except (RealbenchError, OSError, TypeError) as exc:
            log.debug("cannot read the runs of %s: %s", folder, exc)
            continue
        for run in runs:
            pack = (run.get("config") or {}).get("pack")
            if pack and Path(pack).exists():
                return Path(pack)
    return None


def phone_filter(pack: Path | None, certified: Path | None, stores: list[Path]) -> PhoneFilter:
    """The selection's phone filter from the pack (given, or the one the clone runs recorded) and an
    optional certification file. Without a pack nothing can be decided: the source says so."""
    chosen = pack or recorded_pack(stores)
    if chosen is None:
        if certified is not None:
            raise ConfigError(
                "--certified needs the task pack to know the tasks",
                hint="give --pack taskpacks/<app> (the pack the clone runs used)",
            )
        return PhoneFilter(
            {},
            "none: no --pack given and the clone runs record none, so tasks not allowed on a real "
            "account were not left out",
        )
    task_pack = load_pack(chosen)
    excluded = real_exclusions(task_pack)
    source = f"pack {chosen} (tasks not allowed on a real account)"
    if certified is not None:
        rest = [t.id for t in task_pack.tasks if t.id not in excluded]
        excluded.update(certified_exclusions(certified, rest))
        source += f" and certificate {certified} (tasks certified on no phone)"
    return PhoneFilter(excluded, source)


__all__ = ["PhoneFilter", "certified_exclusions", "phone_filter", "recorded_pack"]
