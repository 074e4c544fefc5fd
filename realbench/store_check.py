"""Checking a run store against its episode folders, and rebuilding its index from them.

Each episode folder holds a complete ``episode.json`` (plus ``steps.jsonl`` and, once judged,
``verdicts.jsonl``), so the index can always be rebuilt from the folders. `check_store` only
reads; `repair_store` (under the store's writer lock) brings unknown complete folders back into
the index and re-queues damaged episodes: their rows are dropped and what is left of their folder
is moved to ``DIR/damaged/`` so the next `realbench run` redoes them.

Repair always ends with a store every command opens: a folder it cannot index (an unreadable or
ill-typed episode.json, a copy of an episode already indexed, anything the index refuses) is moved
to ``DIR/damaged/`` too and named with the reason in `StoreRepair.refused`; the command then exits
non-zero so nobody mistakes it for a clean rebuild.
"""

from __future__ import annotations

import json
import logging
import shutil
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from realbench.errors import StoreError
from realbench.store_paths import StoreLinkError

if TYPE_CHECKING:
    from realbench.store import RunStore

log = logging.getLogger(__name__)

DAMAGED_DIR = "damaged"
EPISODE_TEXT_FIELDS = ("episode_id", "run_id", "task", "outcome")
EPISODE_INT_FIELDS = ("seed", "repeat", "attempt")


def read_steps(folder: Path, episode_id: str) -> list[dict[str, Any]]:
    path = folder / "steps.jsonl"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise StoreError(
            f"episode {episode_id} is damaged: {path} is missing",
            hint=f"`realbench store check {folder.parents[2]}` lists damaged episodes; `store repair` re-queues them",
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise StoreError(f"episode {episode_id} is damaged: cannot read {path}: {exc}") from None
    steps = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            step = json.loads(line)
        except ValueError:
            step = None
        if not isinstance(step, dict):
            raise StoreError(
                f"episode {episode_id} is damaged: {path} line {n} is not a JSON step",
                hint=f"`realbench store repair {folder.parents[2]}` re-queues damaged episodes",
            )
        steps.append(step)
    return steps


def read_episode_json(folder: Path) -> dict[str, Any]:
    try:
        meta = json.loads((folder / "episode.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise StoreError(f"{folder}: episode.json is missing") from None
    except (OSError, ValueError) as exc:
        raise StoreError(f"{folder}: episode.json is unreadable ({type(exc).__name__})") from None
    needed = (*EPISODE_TEXT_FIELDS, *EPISODE_INT_FIELDS)
    if not isinstance(meta, dict) or any(k not in meta for k in needed):
        raise StoreError(f"{folder}: episode.json lacks one of {', '.join(needed)}")
    for key in EPISODE_TEXT_FIELDS:
        if not isinstance(meta[key], str) or not meta[key]:
            raise StoreError(f"{folder}: episode.json field {key!r} is not a text ({meta[key]!r:.40})")
    for key in EPISODE_INT_FIELDS:
        value = meta[key]
        if isinstance(value, bool) or not isinstance(value, int):
            raise StoreError(f"{folder}: episode.json field {key!r} is not a whole number ({value!r:.40})")
    return meta


def folder_problem(folder: Path) -> str | None:
    """What is wrong with an indexed episode's folder, or None."""
    if not folder.is_dir():
        return "episode folder is missing"
    try:
        read_episode_json(folder)
        read_steps(folder, folder.name)
    except StoreError as exc:
        return exc.message.split(": ", 1)[-1] if exc.message.startswith(str(folder)) else exc.message
    return None


@dataclass
class StoreCheck:
    """What `store check` found."""

    root: str
    indexed: int = 0
    folders: int = 0
    unknown: list[str] = field(default_factory=list)
    damaged: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.unknown and not self.damaged

    def as_dict(self) -> dict[str, Any]:
        return {
            "store": self.root,
            "ok": self.ok,
            "indexed_episodes": self.indexed,
            "episode_folders": self.folders,
            "unknown_folders": self.unknown,
            "damaged": self.damaged,
        }


def check_store(store: RunStore) -> StoreCheck:
    result = StoreCheck(root=str(store.root))
    result.folders = len(store.episode_folders())
    result.unknown = store.unknown_folders()
    result.indexed = int(store._query("SELECT COUNT(*) AS n FROM episodes")[0]["n"])
    result.damaged = store.damaged()
    return result


@dataclass
class StoreRepair:
    """What `store repair` did."""

    root: str
    restored: list[str] = field(default_factory=list)
    requeued: list[str] = field(default_factory=list)
    quarantined: list[str] = field(default_factory=list)
    runs_restored: list[str] = field(default_factory=list)
    # folders repair could not index, by where they were moved: why (the command exits non-zero)
    refused: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.refused

    def as_dict(self) -> dict[str, Any]:
        return {
            "store": self.root,
            "ok": self.ok,
            "restored": self.restored,
            "requeued": self.requeued,
            "quarantined": self.quarantined,
            "refused": self.refused,
            "runs_restored": self.runs_restored,
        }


def _quarantine(store: RunStore, folder: Path) -> str:
    """Move an episode folder under DIR/damaged/ (never through a link); returns where it went."""
    store.paths.inside(folder)
    target = store.root / DAMAGED_DIR / folder.relative_to(store.root / "episodes")
    if target.exists() or target.is_symlink():
        target = target.with_name(f"{target.name}.{int(time.time() * 1000)}")
    target.parent.mkdir(parents=True, exist_ok=True)
    store.paths.inside(target.parent)
    shutil.move(str(folder), str(target))
    return str(target.relative_to(store.root))


def repair_store(store: RunStore) -> StoreRepair:
    """Rebuild the index from complete folders and re-queue damaged episodes. Needs the writer lock."""
    if store._writer_lock is None:
        raise StoreError("repairing a store needs its writer lock", hint="open it with writer=")
    report = StoreRepair(root=str(store.root))
    for episode_id, _problem in store.damaged().items():
        row = store.episode(episode_id)
        folder = store.root / row["dir"]
        with store._tx() as db:
            for table in ("steps", "verdicts", "episodes"):
                db.execute(f"DELETE FROM {table} WHERE episode_id=?", (episode_id,))
        if (folder.exists() or folder.is_symlink()) and store.paths.is_inside(folder):
            report.quarantined.append(_quarantine(store, folder))
        report.requeued.append(episode_id)
    store._damaged = None
    for rel in store.unknown_folders():
        folder = store.root / rel
        try:
            meta = read_episode_json(folder)
            steps = read_steps(folder, rel)
            _refuse_duplicate(store, meta)
            _restore_run(store, folder.parent, meta, report)
            _restore_episode(store, rel, meta, steps, folder)
        except (StoreError, ValueError, TypeError, KeyError, AttributeError, sqlite3.IntegrityError) as exc:
            why = exc.message if isinstance(exc, StoreError) else f"{type(exc).__name__}: {exc}"
            why = why.removeprefix(f"{folder}: ")
            if isinstance(exc, StoreLinkError):
                report.refused[rel] = why  # never moved through a link: left where it is
                continue
            where = _quarantine(store, folder)
            report.quarantined.append(where)
            report.refused[where] = f"{rel}: {why}"
            log.warning("store repair: %s cannot be indexed (%s); moved to %s", rel, why, where)
            continue
        report.restored.append(str(meta["episode_id"]))
    return report


def _refuse_duplicate(store: RunStore, meta: dict[str, Any]) -> None:
    """A copied episode folder repeats an episode id the index already has: it cannot be indexed twice."""
    rows = store._query("SELECT dir FROM episodes WHERE episode_id=?", [str(meta["episode_id"])])
    if rows:
        raise StoreError(f"a copy of episode {meta['episode_id']}, which is indexed from {rows[0]['dir']}")


def _restore_run(store: RunStore, run_folder: Path, meta: dict[str, Any], report: StoreRepair) -> None:
    run_id = str(meta["run_id"])
    if store._query("SELECT 1 FROM runs WHERE run_id=?", [run_id]):
        return
    try:
        record = json.loads((run_folder / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        record = {}  # a store written before run.json existed: what episode.json tells
    with store._tx() as db:
        db.execute(
            "INSERT INTO runs VALUES (?,?,?,?,?,?,?)",
            (
                run_id,
                record.get("created", meta.get("started")),
                record.get("pack", meta.get("app", "")),
                record.get("app", meta.get("app", "")),
                record.get("agent", meta.get("agent", "")),
                record.get("target", meta.get("target", "")),
                json.dumps(record.get("config", {}), ensure_ascii=False, default=str),
            ),
        )
    report.runs_restored.append(run_id)


def _restore_episode(
    store: RunStore, rel: str, meta: dict[str, Any], steps: list[dict[str, Any]], folder: Path
) -> None:
    from realbench.outcome import Verdict

    verdicts = [Verdict.model_validate(v) for v in meta.get("verdicts") or []]
    later: list[Verdict] = []
    try:
        for line in (folder / "verdicts.jsonl").read_text(encoding="utf-8").splitlines():
            if line.strip():
                later.append(Verdict.model_validate_json(line))
    except (OSError, ValueError):
        pass
    device = meta.get("device") or {}
    first = verdicts[0] if verdicts else None
    episode_id = str(meta["episode_id"])
    with store._tx() as db:
        db.execute(
            "INSERT INTO episodes VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                episode_id,
                meta["run_id"],
                meta["task"],
                int(meta["seed"]),
                int(meta["repeat"]),
                int(meta["attempt"]),
                meta.get("app"),
                meta.get("agent"),
                meta.get("target"),
                device.get("kind"),
                device.get("serial"),
                json.dumps(device, ensure_ascii=False, default=str),
                meta["outcome"],
                meta.get("end_reason"),
                None if first is None else int(first.success),
                None if first is None else first.progress,
                len(steps),
                int(meta.get("format_errors") or 0),
                meta.get("answer"),
                meta.get("instruction"),
                json.dumps(meta.get("params") or {}, ensure_ascii=False, default=str),
                meta.get("started"),
                meta.get("finished"),
                meta.get("error"),
                rel,
            ),
        )
        db.executemany(
            "INSERT INTO steps VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [
                (
                    episode_id,
                    s.get("index"),
                    json.dumps(s["action"], ensure_ascii=False) if s.get("action") is not None else None,
                    s.get("raw"),
                    s.get("thought"),
                    s.get("error"),
                    s.get("screenshot"),
                    s.get("hierarchy"),
                    s.get("app"),
                    s.get("boundary"),
                    s.get("t_observe_s"),
                    s.get("t_agent_s"),
                    s.get("t_act_s"),
                    s.get("tokens_in"),
                    s.get("tokens_out"),
                    json.dumps(s.get("extra"), ensure_ascii=False, default=str),
                )
                for s in steps
            ],
        )
        for verdict in verdicts:
            store._insert_verdict(db, episode_id, verdict)
        # later verdicts (judges, labels) replace earlier ones of the same source and name
        for verdict in later:
            db.execute(
                "DELETE FROM verdicts WHERE episode_id=? AND source=? AND name=?",
                (episode_id, str(verdict.source), verdict.name),
            )
            store._insert_verdict(db, episode_id, verdict)
