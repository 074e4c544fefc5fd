"""The run store: a SQLite index plus one folder per episode.

Layout of a store folder::

    index.sqlite                         runs, episodes, steps, verdicts (labels are human verdicts)
    episodes/<run>/<task>-s<seed>-r<repeat>-a<attempt>/
        episode.json  steps.jsonl  step_000.jpg  step_000.xml  …  final.jpg  final.xml

An episode is written whole or not at all: its id is first recorded as pending, its folder is
written under a temporary name and renamed, then its rows are committed (and the pending mark
dropped) in one transaction. A run killed at any point (even SIGKILL) resumes by skipping the
episodes the index has; a pending folder is an interrupted write and is replaced.

Every writer (`run`, `judge`, labelling, `store repair`) holds the store's exclusive lock
(`realbench.store_lock`). A complete episode folder the index does not know (and that is not
pending) means the index was damaged or replaced: the store refuses to open until
`realbench store repair DIR` rebuilds the index from the folders' episode.json, so such a folder is
never run again or overwritten. Index rows whose folder is missing or unreadable are *damaged*:
reported by name, left out of analysis with a warning, and re-queued by `store repair`.

A store never writes, reads or deletes through a symbolic link (realbench.store_paths): a linked
index, lock, episodes folder or run folder is refused when the store opens, and every path written
or deleted is checked to stay under the root. A store whose folder cannot be written opens
read-only for readers (SQLite ``mode=ro``, or ``immutable=1`` when even the WAL's shared-memory file
cannot be made); writers refuse it in one line. A full disk is one line naming the file system.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from realbench.episode import EpisodeResult
from realbench.errors import StoreError
from realbench.outcome import Outcome, Verdict, VerdictSource
from realbench.store_lock import StoreLock
from realbench.store_paths import (
    StoreLinkError,
    StorePaths,
    StoreReadOnlyError,
    append_file,
    disk_full_error,
    is_disk_full,
    is_read_only,
    read_only_error,
    write_new_file,
)

__all__ = ["EpisodeKey", "RunStore", "StoreLinkError", "StoreReadOnlyError", "is_run_store"]

log = logging.getLogger(__name__)

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, created REAL, pack TEXT, app TEXT, agent TEXT, target TEXT, config TEXT
);
CREATE TABLE IF NOT EXISTS episodes (
    episode_id TEXT PRIMARY KEY, run_id TEXT NOT NULL, task TEXT NOT NULL, seed INTEGER NOT NULL,
    repeat INTEGER NOT NULL, attempt INTEGER NOT NULL, app TEXT, agent TEXT, target TEXT,
    device_kind TEXT, device_serial TEXT, device TEXT, outcome TEXT NOT NULL, end_reason TEXT,
    success INTEGER, progress REAL, steps INTEGER, format_errors INTEGER, answer TEXT,
    instruction TEXT, params TEXT, started REAL, finished REAL, error TEXT, dir TEXT
);
CREATE INDEX IF NOT EXISTS episodes_by_run ON episodes(run_id, task, seed, repeat);
CREATE TABLE IF NOT EXISTS steps (
    episode_id TEXT NOT NULL, idx INTEGER NOT NULL, action TEXT, raw TEXT, thought TEXT, error TEXT,
    screenshot TEXT, hierarchy TEXT, app TEXT, boundary TEXT, t_observe REAL, t_agent REAL,
    t_act REAL, tokens_in INTEGER, tokens_out INTEGER, extra TEXT, PRIMARY KEY (episode_id, idx)
);
CREATE TABLE IF NOT EXISTS verdicts (
    id INTEGER PRIMARY KEY AUTOINCREMENT, episode_id TEXT NOT NULL, source TEXT NOT NULL,
    name TEXT, success INTEGER, abstained INTEGER, progress REAL, reason TEXT, confidence REAL,
    tokens INTEGER, raw TEXT, side_effects TEXT, created REAL, cost_usd REAL
);
CREATE INDEX IF NOT EXISTS verdicts_by_episode ON verdicts(episode_id);
CREATE TABLE IF NOT EXISTS pending (episode_id TEXT PRIMARY KEY, dir TEXT NOT NULL);
"""

RUN_FILE = "run.json"
VERDICTS_FILE = "verdicts.jsonl"
VIDEO_FILE = "video.mp4"  # an episode's screen recording, where the run asked for one


def is_run_store(path: Path) -> bool:
    return path.is_dir() and (path / "index.sqlite").exists()


@dataclass(frozen=True)
class EpisodeKey:
    """Identifies one planned episode of a run (attempts of it are numbered apart)."""

    task: str
    seed: int
    repeat: int


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in name)


def episode_id_for(run_id: str, key: EpisodeKey, attempt: int) -> str:
    return f"{run_id}/{key.task}/s{key.seed}/r{key.repeat}/a{attempt}"


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    write_new_file(tmp, data)
    os.replace(tmp, path)


# What a write made by a store opened without `writer=` names itself in the lock (see `writing`).
ANONYMOUS_WRITER = "a run-store write"


@contextmanager
def _disk_full_is_one_line(root: Path, what: str) -> Iterator[None]:
    try:
        yield
    except (OSError, sqlite3.OperationalError) as exc:
        if is_disk_full(exc):
            raise disk_full_error(root, what) from None
        if is_read_only(exc):
            raise read_only_error(root, what, exc) from None
        raise


class RunStore:
    """Opens (or creates) a store folder. Safe to share between threads of one process.

    `writer` names the command that will write (``"realbench run"``…): it takes the store's
    exclusive lock, failing at once when another process holds it. A store opened without it
    takes the lock for each write (see `writing`). `check=False` skips the index-versus-folders
    check (only `store check|repair` need that).
    """

    def __init__(
        self, root: str | Path, *, create: bool = True, writer: str | None = None, check: bool = True
    ) -> None:
        self.root = Path(root)
        self.paths = StorePaths(self.root)
        index = self.root / "index.sqlite"
        if self.root.exists() and not self.root.is_dir():
            raise StoreError(f"{self.root} is a file, not a run-store folder", hint="pass a folder")
        self.paths.refuse_links()
        if not index.exists() and not create:
            has_episodes = any((self.root / "episodes").glob("*/*/episode.json"))
            raise StoreError(
                f"{self.root} is not a run store (no index.sqlite)",
                hint=f"run `realbench store repair {self.root}` to rebuild the index from its episode folders"
                if has_episodes
                else "pass the --out folder of a `realbench run`",
            )
        self._writer_lock = StoreLock(self.root, writer) if writer else None
        self._lock = threading.RLock()
        self._writing_lock = threading.RLock()
        self._lifetime_writer = writer is not None
        self._damaged: dict[str, str] | None = None
        self.read_only = False
        try:
            self._make_episodes_folder(index, writer)
            self._db = self._connect(index, writer)
            self._db.row_factory = sqlite3.Row
            if not self.read_only:
                self._migrate()
                self._sweep_interrupted_writes()
            if check:
                self._refuse_unknown_folders()
        except BaseException:
            if self._writer_lock is not None:
                self._writer_lock.release()
            raise

    def _make_episodes_folder(self, index: Path, writer: str | None) -> None:
        try:
            (self.root / "episodes").mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            if writer is None and index.exists() and is_read_only(exc):
                return  # a reader of a read-only store: nothing to create
            if is_read_only(exc):
                raise read_only_error(self.root, f"`{writer or ANONYMOUS_WRITER}`", exc) from None
            if is_disk_full(exc):
                raise disk_full_error(self.root, "the episodes folder") from None
            raise

    def _connect(self, index: Path, writer: str | None) -> sqlite3.Connection:
        """The index, opened for writing; a reader of a store it cannot write opens it read-only."""
        damaged_hint = (
            f"the file is damaged: `realbench store repair {self.root}` rebuilds it from the episode folders"
        )
        db = None
        try:
            db = sqlite3.connect(index, check_same_thread=False, isolation_level=None, timeout=30)
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(SCHEMA)
            return db
        except sqlite3.DatabaseError as exc:
            if db is not None:
                db.close()
            if not (is_read_only(exc) and index.exists()):
                raise StoreError(f"cannot open run store index {index}: {exc}", hint=damaged_hint) from None
            if writer is not None:
                raise read_only_error(self.root, f"`{writer}`") from None
            first = exc
        # WAL needs its -shm file: `mode=ro` reads a store whose index is read-only but whose
        # folder is writable (or whose -shm exists); `immutable=1` one that cannot change at all.
        uri = "file:" + quote(str(index.resolve()))
        for options in ("?mode=ro", "?mode=ro&immutable=1"):
            db = sqlite3.connect(uri + options, uri=True, check_same_thread=False, isolation_level=None)
            try:
                db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
                db.execute("SELECT COUNT(*) FROM episodes").fetchone()
            except sqlite3.DatabaseError:
                db.close()
                continue
            self.read_only = True
            if "immutable" in options and index.with_name(index.name + "-wal").exists():
                log.warning(
                    "%s is read-only and its index has an unmerged write-ahead log: episodes written last "
                    "may be missing until someone who can write the folder opens it",
                    self.root,
                )
            log.info("%s cannot be written: opened read-only", self.root)
            return db
        raise StoreError(f"cannot open run store index {index}: {first}", hint=damaged_hint) from None

    @contextmanager
    def writing(self, command: str) -> Iterator[None]:
        """Hold the store's writer lock for the block (a no-op when this store already holds it).
        Refuses at once, naming the holder (StoreLockedError), when another process writes it;
        a read-only store is a StoreReadOnlyError. Threads of one process take turns."""
        if self._lifetime_writer:  # opened with writer=: its worker threads write side by side
            yield
            return
        with self._writing_lock:
            if self._writer_lock is not None:
                yield
                return
            if self.read_only:
                raise read_only_error(self.root, f"`{command}`")
            lock = StoreLock(self.root, command)
            self._writer_lock = lock
            try:
                yield
            finally:
                self._writer_lock = None
                lock.release()

    def _migrate(self) -> None:
        """Bring a store made by an earlier version up to the current schema."""
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(verdicts)")}
        if "cost_usd" not in columns:
            self._db.execute("ALTER TABLE verdicts ADD COLUMN cost_usd REAL")

    def _sweep_interrupted_writes(self) -> None:
        """Remove episode folders half-written by a process that no longer runs (killed mid-write)."""
        for tmp in (self.root / "episodes").glob("*/*.tmp*-*"):
            pid_text = tmp.name.rsplit(".tmp", 1)[-1].split("-", 1)[0]
            if not pid_text.isdigit() or not self.paths.is_inside(tmp):
                continue
            try:
                os.kill(int(pid_text), 0)
            except ProcessLookupError:
                shutil.rmtree(tmp, ignore_errors=True)
            except PermissionError:
                continue
        if self._writer_lock is None:
            return
        # Only the lock holder may judge a pending folder abandoned: its writer is gone.
        for row in self._query("SELECT dir FROM pending"):
            folder = self.root / row["dir"]
            if not self.paths.is_inside(folder):
                log.warning(
                    "%s: pending folder %s leads outside the store; left alone", self.root, row["dir"]
                )
                continue
            if folder.exists():
                shutil.rmtree(folder, ignore_errors=True)
        self._db.execute("DELETE FROM pending")

    def episode_folders(self) -> dict[str, Path]:
        """Complete episode folders on disk (with an episode.json), by their path relative to the root."""
        return {
            str(p.parent.relative_to(self.root)): p.parent
            for p in (self.root / "episodes").glob("*/*/episode.json")
            if ".tmp" not in p.parent.name and not p.parent.is_symlink() and not p.parent.parent.is_symlink()
        }

    def known_dirs(self) -> set[str]:
        rows = self._query("SELECT dir FROM episodes UNION SELECT dir FROM pending")
        return {row["dir"] for row in rows}

    def unknown_folders(self) -> list[str]:
        """Complete episode folders neither indexed nor being written: the index lost them."""
        on_disk = self.episode_folders()  # listed before the index is read: see write_episode
        known = self.known_dirs()
        return sorted(d for d in on_disk if d not in known)

    def _refuse_unknown_folders(self) -> None:
        unknown = self.unknown_folders()
        if unknown:
            shown = ", ".join(unknown[:3]) + (" …" if len(unknown) > 3 else "")
            raise StoreError(
                f"the index of {self.root} disagrees with its episode folders: {len(unknown)} complete "
                f"episode folder(s) are not in index.sqlite ({shown})",
                hint=f"run `realbench store check {self.root}`, then `realbench store repair {self.root}` "
                "to rebuild the index from the folders' episode.json; nothing was run or overwritten",
            )

    def damaged(self) -> dict[str, str]:
        """Indexed episodes whose folder is missing or unreadable: episode id -> what is wrong."""
        if self._damaged is None:
            from realbench.store_check import folder_problem

            found = {}
            for row in self._query("SELECT episode_id, dir FROM episodes ORDER BY episode_id"):
                problem = folder_problem(self.root / row["dir"])
                if problem is not None:
                    found[row["episode_id"]] = problem
            self._damaged = found
        return dict(self._damaged)

    def close(self) -> None:
        with self._lock:
            self._db.close()
        if self._writer_lock is not None:
            self._writer_lock.release()
            self._writer_lock = None
        self._lifetime_writer = False

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _query(self, sql: str, args: Iterable[Any] = ()) -> list[sqlite3.Row]:
        with self._lock:
            return list(self._db.execute(sql, tuple(args)))

    # --- runs ---------------------------------------------------------------------------------

    def ensure_run(
        self, run_id: str, *, pack: str, app: str, agent: str, target: str, config: dict[str, Any]
    ) -> None:
        """Record a run once; a rerun of the same run must use the same pack, agent and target."""
        with self.writing(ANONYMOUS_WRITER), _disk_full_is_one_line(self.root, f"run {run_id}"):
            self._ensure_run(run_id, pack=pack, app=app, agent=agent, target=target, config=config)

    def _ensure_run(
        self, run_id: str, *, pack: str, app: str, agent: str, target: str, config: dict[str, Any]
    ) -> None:
        rows = self._query("SELECT pack, agent, target FROM runs WHERE run_id=?", [run_id])
        self._write_run_file(run_id, pack=pack, app=app, agent=agent, target=target, config=config)
        if rows:
            old = dict(rows[0])
            new = {"pack": pack, "agent": agent, "target": target}
            if old != new:
                raise StoreError(
                    f"run {run_id!r} in {self.root} was made with {old}, not {new}",
                    hint="use another --out folder or --run-id for a different configuration",
                )
            return
        with self._tx() as db:
            db.execute(
                "INSERT INTO runs VALUES (?,?,?,?,?,?,?)",
                (
                    run_id,
                    time.time(),
                    pack,
                    app,
                    agent,
                    target,
                    json.dumps(config, ensure_ascii=False, default=str),
                ),
            )

    def _write_run_file(self, run_id: str, **fields: Any) -> None:
        """The run's own record beside its episodes, so `store repair` can restore the runs table."""
        folder = self.paths.inside(self.root / "episodes" / _safe(run_id))
        path = self.paths.inside(folder / RUN_FILE)
        if path.exists():
            return
        folder.mkdir(parents=True, exist_ok=True)
        record = {"run_id": run_id, "created": time.time(), **fields}
        _atomic_write(path, json.dumps(record, ensure_ascii=False, indent=1, default=str).encode())

    def runs(self) -> list[dict[str, Any]]:
        out = []
        for row in self._query("SELECT * FROM runs ORDER BY created"):
            d = dict(row)
            d["config"] = json.loads(d["config"] or "{}")
            out.append(d)
        return out

    # --- episodes -----------------------------------------------------------------------------

    def attempts(self, run_id: str, *, include_damaged: bool = True) -> dict[EpisodeKey, list[Outcome]]:
        """Outcomes of every recorded attempt, by planned episode, in attempt order. A damaged
        attempt still counts as done (a run does not redo it until `store repair` re-queues it)
        unless `include_damaged` is False (what summaries use)."""
        out: dict[EpisodeKey, list[Outcome]] = {}
        rows = self._query(
            "SELECT episode_id, task, seed, repeat, outcome FROM episodes WHERE run_id=? ORDER BY attempt",
            [run_id],
        )
        damaged = {} if include_damaged else self.damaged()
        for row in rows:
            if row["episode_id"] in damaged:
                continue
            out.setdefault(EpisodeKey(row["task"], row["seed"], row["repeat"]), []).append(
                Outcome(row["outcome"])
            )
        return out

    def episode_ids(self, run_id: str) -> set[str]:
        return {
            r["episode_id"] for r in self._query("SELECT episode_id FROM episodes WHERE run_id=?", [run_id])
        }

    def attempt_numbers(self, run_id: str) -> dict[EpisodeKey, list[int]]:
        """Numbers of the recorded attempts of each planned episode (gaps where repair re-queued one)."""
        out: dict[EpisodeKey, list[int]] = {}
        rows = self._query(
            "SELECT task, seed, repeat, attempt FROM episodes WHERE run_id=? ORDER BY attempt", [run_id]
        )
        for row in rows:
            out.setdefault(EpisodeKey(row["task"], row["seed"], row["repeat"]), []).append(row["attempt"])
        return out

    def write_episode(
        self, run_id: str, key: EpisodeKey, attempt: int, app: str, result: EpisodeResult
    ) -> str:
        """Write one finished episode atomically; returns its episode id."""
        episode_id = episode_id_for(run_id, key, attempt)
        with self.writing(ANONYMOUS_WRITER), _disk_full_is_one_line(self.root, f"episode {episode_id}"):
            return self._write_episode(run_id, key, attempt, app, result)

    def _write_episode(
        self, run_id: str, key: EpisodeKey, attempt: int, app: str, result: EpisodeResult
    ) -> str:
        episode_id = episode_id_for(run_id, key, attempt)
        rel = Path("episodes") / _safe(run_id) / f"{_safe(key.task)}-s{key.seed}-r{key.repeat}-a{attempt}"
        final_dir = self.paths.inside(self.root / rel)
        if self._query("SELECT 1 FROM episodes WHERE episode_id=?", [episode_id]):
            raise StoreError(
                f"episode {episode_id} is already in {self.root}; refusing to write it twice",
                hint="is another process writing this store without its lock?",
            )
        if (final_dir / "episode.json").exists():
            raise StoreError(
                f"{final_dir} holds a complete episode the index does not know; refusing to overwrite it",
                hint=f"run `realbench store repair {self.root}` to bring it back into the index",
            )
        # Marked pending (committed) before the folder appears, so a reader that lists the folder
        # and then reads the index always finds it either pending or indexed.
        with self._tx() as db:
            db.execute("INSERT OR REPLACE INTO pending VALUES (?,?)", (episode_id, str(rel)))
        tmp_dir = self.paths.inside(
            final_dir.with_name(final_dir.name + f".tmp{os.getpid()}-{threading.get_ident()}")
        )
        if tmp_dir.exists():
            shutil.rmtree(tmp_dir)
        try:
            step_rows = self._write_folder(tmp_dir, episode_id, run_id, key, attempt, app, result)
        except BaseException:
            shutil.rmtree(tmp_dir, ignore_errors=True)  # the pending mark stays: the next writer sweeps
            raise
        self.paths.inside(final_dir)  # again: a link planted while the folder was written
        if final_dir.exists():  # an interrupted earlier write of this attempt: no episode.json
            shutil.rmtree(final_dir)
        os.replace(tmp_dir, final_dir)
        self._index_episode(episode_id, run_id, key, attempt, app, result, str(rel), step_rows)
        return episode_id

    def _write_folder(
        self,
        tmp_dir: Path,
        episode_id: str,
        run_id: str,
        key: EpisodeKey,
        attempt: int,
        app: str,
        result: EpisodeResult,
    ) -> list[tuple[Any, ...]]:
        """The episode's files in its temporary folder; returns its step rows for the index."""
        tmp_dir.mkdir(parents=True)
        step_rows: list[tuple[Any, ...]] = []
        lines = []
        for step in result.steps:
            shot = None
            if step.screenshot is not None:
                shot = f"step_{step.index:03d}{step.image_format.suffix}"
                write_new_file(tmp_dir / shot, step.screenshot)
            xml = None
            if step.hierarchy is not None:
                xml = f"step_{step.index:03d}.xml"
                write_new_file(tmp_dir / xml, step.hierarchy.encode("utf-8"))
            record = {
                "index": step.index,
                "action": step.action,
                "raw": step.raw,
                "thought": step.thought,
                "error": step.error,
                "screenshot": shot,
                "hierarchy": xml,
                "width": step.width,
                "height": step.height,
                "app": step.app,
                "boundary": step.boundary,
                "t_observe_s": round(step.t_observe_s, 6),
                "t_agent_s": round(step.t_agent_s, 6),
                "t_act_s": round(step.t_act_s, 6),
                "tokens_in": step.tokens_in,
                "tokens_out": step.tokens_out,
                "extra": step.extra,
            }
            lines.append(json.dumps(record, ensure_ascii=False, default=str))
            step_rows.append(
                (
                    episode_id,
                    step.index,
                    json.dumps(step.action, ensure_ascii=False) if step.action is not None else None,
                    step.raw,
                    step.thought,
                    step.error,
                    shot,
                    xml,
                    step.app,
                    step.boundary,
                    step.t_observe_s,
                    step.t_agent_s,
                    step.t_act_s,
                    step.tokens_in,
                    step.tokens_out,
                    json.dumps(step.extra, ensure_ascii=False, default=str),
                )
            )
        write_new_file(tmp_dir / "steps.jsonl", ("\n".join(lines) + ("\n" if lines else "")).encode("utf-8"))
        if result.final_screenshot is not None:
            write_new_file(tmp_dir / f"final{result.final_image_format.suffix}", result.final_screenshot)
        if result.final_hierarchy is not None:
            write_new_file(tmp_dir / "final.xml", result.final_hierarchy.encode("utf-8"))
        if result.video is not None:
            write_new_file(tmp_dir / VIDEO_FILE, result.video)
        meta = {
            "episode_id": episode_id,
            "run_id": run_id,
            "app": app,
            "task": key.task,
            "seed": key.seed,
            "repeat": key.repeat,
            "attempt": attempt,
            "instruction": result.instruction,
            "params": result.params,
            "agent": result.agent,
            "target": result.target,
            "device": result.device,
            "outcome": str(result.outcome),
            "end_reason": str(result.end_reason),
            "answer": result.answer,
            "error": result.error,
            "format_errors": result.format_errors,
            "verdicts": [v.model_dump(mode="json") for v in result.verdicts],
            "started": result.started,
            "finished": result.finished,
            "video": VIDEO_FILE if result.video is not None else None,
        }
        _atomic_write(
            tmp_dir / "episode.json", json.dumps(meta, ensure_ascii=False, indent=1, default=str).encode()
        )
        return step_rows

    def _index_episode(
        self,
        episode_id: str,
        run_id: str,
        key: EpisodeKey,
        attempt: int,
        app: str,
        result: EpisodeResult,
        rel: str,
        step_rows: list[tuple[Any, ...]],
    ) -> None:
        success = result.success
        with self._tx() as db:
            db.execute("DELETE FROM pending WHERE episode_id=?", (episode_id,))
            db.execute("DELETE FROM steps WHERE episode_id=?", (episode_id,))
            db.execute("DELETE FROM verdicts WHERE episode_id=?", (episode_id,))
            db.execute(
                "INSERT INTO episodes VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    episode_id,
                    run_id,
                    key.task,
                    key.seed,
                    key.repeat,
                    attempt,
                    app,
                    result.agent,
                    result.target,
                    result.device.get("kind"),
                    result.device.get("serial"),
                    json.dumps(result.device, ensure_ascii=False, default=str),
                    str(result.outcome),
                    str(result.end_reason),
                    None if success is None else int(success),
                    result.progress,
                    len(result.steps),
                    result.format_errors,
                    result.answer,
                    result.instruction,
                    json.dumps(result.params, ensure_ascii=False, default=str),
                    result.started,
                    result.finished,
                    result.error,
                    rel,
                ),
            )
            db.executemany("INSERT INTO steps VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", step_rows)
            for verdict in result.verdicts:
                self._insert_verdict(db, episode_id, verdict)

    def _insert_verdict(self, db: sqlite3.Connection, episode_id: str, v: Verdict) -> None:
        db.execute(
            "INSERT INTO verdicts (episode_id, source, name, success, abstained, progress, reason, confidence, tokens, raw, side_effects, created, cost_usd) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                episode_id,
                str(v.source),
                v.name,
                int(v.success),
                int(v.abstained),
                v.progress,
                v.reason,
                v.confidence,
                v.tokens,
                v.raw,
                json.dumps(v.side_effects, ensure_ascii=False),
                time.time(),
                v.cost_usd,
            ),
        )

    def add_verdict(self, episode_id: str, verdict: Verdict, *, replace: bool = True) -> None:
        """Record a verdict (judge, checks, human label). By default replaces an earlier verdict of
        the same source and name, so re-judging is idempotent."""
        with self.writing(ANONYMOUS_WRITER), _disk_full_is_one_line(self.root, f"a verdict on {episode_id}"):
            self._add_verdict(episode_id, verdict, replace=replace)

    def _add_verdict(self, episode_id: str, verdict: Verdict, *, replace: bool) -> None:
        rows = self._query("SELECT dir FROM episodes WHERE episode_id=?", [episode_id])
        if not rows:
            raise StoreError(f"no episode {episode_id!r} in {self.root}")
        folder = self.paths.inside(self.root / rows[0]["dir"])
        if folder.is_dir():  # a copy beside the episode, so `store repair` can restore verdicts
            line = json.dumps(verdict.model_dump(mode="json"), ensure_ascii=False) + "\n"
            append_file(self.paths.inside(folder / VERDICTS_FILE), line.encode("utf-8"))
        with self._tx() as db:
            if replace:
                db.execute(
                    "DELETE FROM verdicts WHERE episode_id=? AND source=? AND name=?",
                    (episode_id, str(verdict.source), verdict.name),
                )
            self._insert_verdict(db, episode_id, verdict)

    def add_label(self, episode_id: str, labeller: str, success: bool, note: str = "") -> None:
        self.add_verdict(
            episode_id, Verdict(success=success, reason=note, source=VerdictSource.HUMAN, name=labeller)
        )

    # --- reading ------------------------------------------------------------------------------

    def decisions(self, run_id: str) -> dict[EpisodeKey, Verdict]:
        """The deciding verdict (Verdict.decide) of the last attempt of each planned episode."""
        rows = self._query(
            "SELECT e.task, e.seed, e.repeat, e.attempt, v.* FROM episodes e JOIN verdicts v ON v.episode_id = e.episode_id "
            "WHERE e.run_id=? ORDER BY e.attempt, v.id",
            [run_id],
        )
        by_key: dict[EpisodeKey, tuple[int, list[Verdict]]] = {}
        for row in rows:
            key = EpisodeKey(row["task"], row["seed"], row["repeat"])
            attempt, verdicts = by_key.get(key, (-1, []))
            if row["attempt"] > attempt:
                attempt, verdicts = row["attempt"], []
            verdicts.append(self._verdict(row))
            by_key[key] = (attempt, verdicts)
        out: dict[EpisodeKey, Verdict] = {}
        for key, (_, verdicts) in by_key.items():
            decided = Verdict.decide(verdicts)
            if decided is not None:
                out[key] = decided
        return out

    @staticmethod
    def _verdict(row: sqlite3.Row) -> Verdict:
        return Verdict(
            success=bool(row["success"]),
            progress=row["progress"] or 0.0,
            side_effects=json.loads(row["side_effects"] or "[]"),
            reason=row["reason"] or "",
            source=VerdictSource(row["source"]),
            name=row["name"] or "",
            abstained=bool(row["abstained"]),
            confidence=row["confidence"],
            raw=row["raw"],
            tokens=row["tokens"],
            cost_usd=row["cost_usd"],
        )

    def episode(self, episode_id: str) -> dict[str, Any]:
        rows = self._query("SELECT * FROM episodes WHERE episode_id=?", [episode_id])
        if not rows:
            raise StoreError(f"no episode {episode_id!r} in {self.root}")
        return dict(rows[0])

    def episode_dir(self, episode_id: str) -> Path:
        return self.root / self.episode(episode_id)["dir"]

    def steps(self, episode_id: str) -> list[dict[str, Any]]:
        """The episode's steps; a missing or unreadable steps.jsonl is a StoreError naming it."""
        from realbench.store_check import read_steps

        return read_steps(self.episode_dir(episode_id), episode_id)

    def verdicts(self, episode_id: str) -> list[Verdict]:
        return [
            self._verdict(row)
            for row in self._query("SELECT * FROM verdicts WHERE episode_id=? ORDER BY id", [episode_id])
        ]

    def episodes_frame(self, run_ids: list[str] | None = None, *, include_damaged: bool = False) -> Any:
        """One row per recorded attempt (pandas). `env` is the target kind; `model` the agent name.
        Damaged episodes (see `damaged`) are left out, with a warning naming them."""
        import pandas as pd

        sql = "SELECT * FROM episodes"
        args: list[Any] = []
        if run_ids:
            sql += f" WHERE run_id IN ({','.join('?' * len(run_ids))})"
            args = list(run_ids)
        rows = [dict(r) for r in self._query(sql + " ORDER BY run_id, task, seed, repeat, attempt", args)]
        if not include_damaged:
            damaged = self.damaged()
            left_out = [r["episode_id"] for r in rows if r["episode_id"] in damaged]
            if left_out:
                log.warning(
                    "%s: %d damaged episode(s) left out of analysis (%s); `realbench store check %s` lists them",
                    self.root,
                    len(left_out),
                    ", ".join(left_out[:3]) + (" …" if len(left_out) > 3 else ""),
                    self.root,
                )
                rows = [r for r in rows if r["episode_id"] not in damaged]
        frame = pd.DataFrame(rows)
        if frame.empty:
            return pd.DataFrame(
                columns=[
                    "run_id",
                    "episode_id",
                    "task",
                    "app",
                    "model",
                    "env",
                    "device_kind",
                    "device_serial",
                    "repeat",
                    "seed",
                    "attempt",
                    "outcome",
                    "success",
                    "progress",
                    "steps",
                    "duration_s",
                    "answer",
                    "end_reason",
                    "scored",
                ]
            )
        frame = frame.rename(columns={"agent": "model", "target": "env"})
        frame["success"] = (
            frame["success"].map(lambda v: None if v is None or v != v else bool(v)).astype(object)
        )
        frame["duration_s"] = frame["finished"] - frame["started"]
        frame["scored"] = ~frame["outcome"].isin([str(Outcome.ENV_INVALID), str(Outcome.INTERRUPTED)])
        frame["store"] = str(self.root)
        return frame

    def verdicts_frame(self) -> Any:
        import pandas as pd

        rows = [dict(r) for r in self._query("SELECT * FROM verdicts ORDER BY id")]
        frame = pd.DataFrame(rows)
        if not frame.empty:
            frame["success"] = frame["success"].astype(bool)
            frame["abstained"] = frame["abstained"].astype(bool)
        return frame

    def export_parquet(self, out_dir: str | Path) -> list[Path]:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths = []
        for name, frame in (("episodes", self.episodes_frame()), ("verdicts", self.verdicts_frame())):
            path = out / f"{name}.parquet"
            frame.drop(columns=[c for c in ("device",) if c in frame.columns]).to_parquet(path, index=False)
            paths.append(path)
        return paths
