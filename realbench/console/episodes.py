"""Episodes of the run stores, as the console's pages show them: summaries, filtered tables and
one episode's steps with the tap drawn where it landed (the report's replay drawing).

A page embeds only files that lie inside the store: a step's screenshot path is data from the
store's index and a folder may hold links, so each file is resolved and must be a regular file
under the store's root reached without following a symbolic link (`store_file`).
"""

from __future__ import annotations

import base64
import json
import logging
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from analysis.report import annotate_screenshot, describe_action, episode_video
from realbench.errors import ConfigError, RealbenchError, StoreError
from realbench.store import VIDEO_FILE, RunStore

log = logging.getLogger(__name__)

TASKPACKS = Path(__file__).resolve().parents[2] / "taskpacks"
REPLAY_WIDTH = 300


class Stores:
    """The run stores the console was given, by the path string given (or its position)."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths = {str(p): Path(p) for p in paths}
        self._open: dict[str, RunStore] = {}

    def names(self) -> list[str]:
        return list(self.paths)

    def get(self, name: str) -> RunStore:
        key = name
        if key not in self.paths and key.isdigit() and int(key) < len(self.paths):
            key = list(self.paths)[int(key)]
        if key not in self.paths:
            raise ConfigError(f"{name!r} is not one of the console's stores", hint=f"stores: {self.names()}")
        if key not in self._open:
            self._open[key] = RunStore(self.paths[key], create=False)
        return self._open[key]

    def close(self) -> None:
        for s in self._open.values():
            s.close()
        self._open.clear()


def run_summaries(store: RunStore) -> list[dict[str, Any]]:
    frame = store.episodes_frame()
    out = []
    for run in store.runs():
        g = frame[frame["run_id"] == run["run_id"]] if not frame.empty else frame
        scored = g[g["scored"].astype(bool)] if not g.empty else g
        decided = [s for s in (scored["success"] if not scored.empty else []) if s is not None]
        out.append(
            {
                "run_id": run["run_id"],
                "pack": run["pack"],
                "agent": run["agent"],
                "target": run["target"],
                "episodes": len(g),
                "scored": len(scored),
                "aborted": len(g) - len(scored),
                "successes": sum(bool(s) for s in decided),
                "decided": len(decided),
                "outcomes": g["outcome"].value_counts().to_dict() if not g.empty else {},
            }
        )
    return out


def episode_rows(
    store: RunStore, *, outcome: str = "", model: str = "", target: str = "", run: str = ""
) -> list[dict[str, Any]]:
    frame = store.episodes_frame()
    if frame.empty:
        return []
    for col, value in (("outcome", outcome), ("model", model), ("env", target), ("run_id", run)):
        if value:
            frame = frame[frame[col].astype(str) == value]
    cols = [
        "episode_id",
        "run_id",
        "task",
        "seed",
        "repeat",
        "attempt",
        "model",
        "env",
        "device_kind",
        "device_serial",
        "outcome",
        "success",
        "steps",
        "answer",
    ]
    return [
        {c: (None if v is None or v != v else v) for c, v in row.items()}
        for row in frame[cols].to_dict(orient="records")
    ]


def task_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per task (and model, target): attempts, scored, successes among decided, outcomes."""
    by: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in rows:
        key = (str(r["task"]), str(r["model"]), str(r["env"]))
        t = by.setdefault(
            key,
            {
                "task": key[0],
                "model": key[1],
                "target": key[2],
                "attempts": 0,
                "successes": 0,
                "decided": 0,
                "outcomes": {},
            },
        )
        t["attempts"] += 1
        t["outcomes"][r["outcome"]] = t["outcomes"].get(r["outcome"], 0) + 1
        if r["success"] is not None and r["outcome"] != "env_invalid":
            t["decided"] += 1
            t["successes"] += int(bool(r["success"]))
    return [by[k] for k in sorted(by)]


def store_file(store: RunStore, folder: Path, name: str) -> Path | None:
    """`folder/name` when it is a regular file inside the store reached without a symbolic link
    or `..` (a page may embed it), else None (logged)."""
    root = Path(os.path.normpath(store.root.absolute()))
    wanted = Path(os.path.normpath((folder / name).absolute()))
    try:
        inside = wanted.relative_to(root)
        real = wanted.resolve(strict=True)
    except (ValueError, OSError):
        log.warning("not embedding %s: outside the store %s or missing", folder / name, store.root)
        return None
    if ".." in inside.parts or real != root.resolve() / inside or not real.is_file():
        log.warning("not embedding %s: a link or not a plain file of the store", folder / name)
        return None
    return real


def _data_uri(path: Path | None, width: int) -> str | None:
    return annotate_screenshot(path, None, width) if path is not None else None


@lru_cache(maxsize=8)
def _pack_rubrics(app: str) -> dict[str, str]:
    from realbench.taskpack import load_pack

    folder = TASKPACKS / app
    if not (folder / "pack.yaml").exists():
        return {}
    try:
        pack = load_pack(folder)
    except RealbenchError as exc:
        log.info("no rubrics from %s: %s", folder, exc.message)
        return {}
    return {t.id: t.judge.rubric for t in pack.tasks if getattr(t, "judge", None) is not None}


def rubric_for(store: RunStore, episode: dict[str, Any]) -> str:
    runs = {r["run_id"]: r for r in store.runs()}
    run = runs.get(episode["run_id"], {})
    return _pack_rubrics(str(run.get("pack") or episode.get("app") or "")).get(episode["task"], "")


def episode_view(store: RunStore, episode_id: str, *, width: int = REPLAY_WIDTH) -> dict[str, Any]:
    """Instruction, each step's screenshot with its action drawn, typed text, answer, final screen.
    Verdicts are not part of it: a page that must stay blind can show it as it is."""
    ep = store.episode(episode_id)
    folder = store.episode_dir(episode_id)
    steps = []
    typed = []
    for st in store.steps(episode_id):
        action = st.get("action")
        shot = st.get("screenshot")
        path = store_file(store, folder, str(shot)) if shot else None
        image = annotate_screenshot(path, action, width) if path is not None else None
        if isinstance(action, dict) and action.get("type") == "type":
            typed.append(str(action.get("text", "")))
        steps.append(
            {
                "index": st.get("index"),
                "image": image,
                "action": describe_action(action),
                "thought": st.get("thought") or "",
                "error": st.get("error") or "",
                "boundary": st.get("boundary") or "",
            }
        )
    final = next((p for f in ("final.jpg", "final.png") if (p := store_file(store, folder, f))), None)
    return {
        "episode": episode_id,
        "run_id": ep["run_id"],
        "task": ep["task"],
        "model": ep["agent"],
        "target": ep["target"],
        "device": f"{ep.get('device_serial') or '?'} ({ep.get('device_kind') or '?'})",
        "virtual": ep.get("device_kind") == "virtual-phone",
        "instruction": ep.get("instruction") or "",
        "params": json.loads(ep.get("params") or "{}"),
        "rubric": rubric_for(store, ep),
        "answer": ep.get("answer"),
        "typed": typed,
        "outcome": ep["outcome"],
        "steps": steps,
        "final": _data_uri(final, width),
        "video": episode_video(folder) if store_file(store, folder, VIDEO_FILE) is not None else None,
    }


def counterpart(store: RunStore, episode_id: str) -> str | None:
    """The same task, seed and model on the other side (clone vs phone), if the store has one."""
    return _counterpart_in(store, store.episode(episode_id))


def counterpart_anywhere(stores: Stores, store: RunStore, episode_id: str) -> tuple[RunStore, str] | None:
    """The other side of an episode in its own store or, failing that, in any other store the
    console was given (in the order given)."""
    ep = store.episode(episode_id)
    candidates = [store]
    for name in stores.names():
        try:
            other = stores.get(name)
        except RealbenchError as exc:  # one unreadable store does not hide the episode itself
            log.warning("not looking for the other side in %s: %s", name, exc.message)
            continue
        if other is not store:
            candidates.append(other)
    for other in candidates:
        found = _counterpart_in(other, ep)
        if found is not None:
            return other, found
    return None


def _counterpart_in(store: RunStore, ep: dict[str, Any]) -> str | None:
    frame = store.episodes_frame()
    if frame.empty:
        return None
    clone = str(ep["target"]) == "clone"
    same = frame[
        (frame["task"] == ep["task"])
        & (frame["model"] == ep["agent"])
        & ((frame["env"] == "clone") != clone)
        & frame["scored"].astype(bool)
    ]
    if same.empty:
        return None
    exact = same[same["seed"] == ep["seed"]]
    return str((exact if not exact.empty else same).iloc[0]["episode_id"])


def verdict_rows(store: RunStore, episode_id: str) -> list[dict[str, Any]]:
    return [
        {
            "source": str(v.source),
            "name": v.name,
            "success": None if v.abstained else v.success,
            "reason": v.reason[:300],
        }
        for v in store.verdicts(episode_id)
    ]


def jpeg_data_uri(data: bytes) -> str:
    return "data:image/jpeg;base64," + base64.b64encode(data).decode("ascii")


__all__ = [
    "Stores",
    "StoreError",
    "counterpart",
    "counterpart_anywhere",
    "episode_rows",
    "episode_view",
    "run_summaries",
    "store_file",
]
