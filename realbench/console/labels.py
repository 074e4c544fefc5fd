"""The blind labelling queue for judge audits.

A labeller sees an episode without any verdict; the label is written to the run store as a human
verdict (`source=human`, `name=<labeller>`) in one transaction, and only then are the judge's
verdicts shown. The label is written under the store's writer lock, taken for that one write: while
another process writes the store (`realbench run`, `judge`), the label is refused, naming it. "Unsure" is stored as an abstaining human verdict, which audits do not count as
ground truth. The queue serves first the episodes a labelling plan lists (``realbench audit
--plan-labels N`` writes one: a JSON object with an ``episodes`` list of episode ids), then every
other judged episode, device-side episodes first.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
from pathlib import Path
from typing import Any

import numpy as np

from realbench.console.episodes import Stores, episode_view
from realbench.errors import ConfigError
from realbench.outcome import Outcome, Verdict, VerdictSource
from realbench.store import RunStore

log = logging.getLogger(__name__)

PLAN_NAMES = ("label-plan.json", "labels-plan.json", "label_plan.json")
LABELLER_MAX = 60
LOCK_COMMAND = "realbench console (a label)"


def read_plan(path: Path) -> list[tuple[str, str | None]]:
    """(episode id, store path or None) of a labelling plan, in order. The plan `realbench audit
    --plan-labels N` writes is {"kind": "realbench-label-plan", "episodes": [{"order", "episode",
    "store", ...}]}; a bare {"episodes": [id, ...]} is read too."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"cannot read labelling plan {path}: {exc}", hint='write {"episodes": [...]}'
        ) from None
    items = data.get("episodes") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise ConfigError(f"{path} has no 'episodes' list", hint='a labelling plan is {"episodes": [...]}')
    if all(isinstance(i, dict) and isinstance(i.get("order"), int) for i in items):
        items = sorted(items, key=lambda i: i["order"])
    out: list[tuple[str, str | None]] = []
    for item in items:
        store = None
        if isinstance(item, dict):
            store = item.get("store")
            item = item.get("episode_id") or item.get("episode")
        if isinstance(item, str) and item:
            out.append((item, str(store) if store else None))
    return out


def _same_folder(a: str, b: Path) -> bool:
    try:
        return Path(a).resolve() == b.resolve()
    except OSError:
        return False


def _plan_for(store: RunStore, plan_files: list[Path]) -> list[str]:
    """Episode ids of this store that the plans list, in plan order."""
    ids: list[str] = []
    for path in plan_files:
        if not path.exists():
            continue
        for episode, where in read_plan(path):
            if (where is None or _same_folder(where, store.root)) and episode not in ids:
                ids.append(episode)
    return ids


def check_labeller(name: str) -> str:
    name = name.strip()
    if not name or len(name) > LABELLER_MAX:
        raise ConfigError(
            "a labeller needs a name (1–60 characters)", hint="type your name in the labelling page"
        )
    return name


class LabelQueue:
    def __init__(self, stores: Stores, plans: list[Path] | None = None) -> None:
        self.stores = stores
        self.plans = list(plans or [])

    def _judged(self, store: RunStore) -> list[str]:
        """Scored episodes with a judge verdict, device side first."""
        rows = store._query(
            "SELECT DISTINCT e.episode_id, e.target FROM episodes e JOIN verdicts v ON v.episode_id=e.episode_id "
            "WHERE v.source=? AND e.outcome != ? ORDER BY e.episode_id",
            [str(VerdictSource.JUDGE), str(Outcome.ENV_INVALID)],
        )
        return [
            r["episode_id"] for r in sorted(rows, key=lambda r: (r["target"] == "clone", r["episode_id"]))
        ]

    def _labelled_by(self, store: RunStore, labeller: str) -> set[str]:
        rows = store._query(
            "SELECT DISTINCT episode_id FROM verdicts WHERE source=? AND name=?",
            [str(VerdictSource.HUMAN), labeller],
        )
        return {r["episode_id"] for r in rows}

    def queue(self, store_name: str, labeller: str) -> list[tuple[str, bool]]:
        """(episode id, from the plan) in serving order, without what this labeller already did."""
        store = self.stores.get(store_name)
        done = self._labelled_by(store, check_labeller(labeller))
        judged = self._judged(store)
        known = {r["episode_id"] for r in store._query("SELECT episode_id FROM episodes", [])}
        plan_files = [*self.plans, *(Path(p) / n for p in self.stores.paths.values() for n in PLAN_NAMES)]
        planned = [e for e in _plan_for(store, plan_files) if e in known]
        order = [(e, True) for e in planned] + [(e, False) for e in judged if e not in planned]
        return [(e, p) for e, p in order if e not in done]

    def next(self, store_name: str, labeller: str) -> dict[str, Any] | None:
        queue = self.queue(store_name, labeller)
        if not queue:
            return None
        episode_id, planned = queue[0]
        view = episode_view(self.stores.get(store_name), episode_id)
        return {**view, "store": store_name, "planned": planned, "remaining": len(queue)}

    def save(
        self, store_name: str, episode_id: str, labeller: str, success: bool | None, note: str = ""
    ) -> dict[str, Any]:
        """Write the label (one transaction) and reveal the judge's verdicts on that episode."""
        store = self.stores.get(store_name)
        verdict = Verdict(
            success=bool(success),
            abstained=success is None,
            reason=note[:2000],
            source=VerdictSource.HUMAN,
            name=check_labeller(labeller),
        )
        with store.writing(LOCK_COMMAND):  # StoreLockedError names the holder
            store.add_verdict(episode_id, verdict)
        judges = [
            {"name": v.name, "success": None if v.abstained else v.success, "reason": v.reason[:300]}
            for v in store.verdicts(episode_id)
            if v.source is VerdictSource.JUDGE
        ]
        return {"saved": True, "episode": episode_id, "labeller": verdict.name, "judge": judges}

    def agreement(self, store_name: str) -> dict[str, Any]:
        """Cohen's κ for each pair of labellers over the episodes both labelled (unsure left out)."""
        from analysis.stats import cohen_kappa

        store = self.stores.get(store_name)
        rows = store._query(
            "SELECT episode_id, name, success, abstained FROM verdicts WHERE source=? ORDER BY id",
            [str(VerdictSource.HUMAN)],
        )
        labels: dict[str, dict[str, bool | None]] = {}
        for r in rows:
            labels.setdefault(r["name"], {})[r["episode_id"]] = None if r["abstained"] else bool(r["success"])
        pairs = []
        for a, b in itertools.combinations(sorted(labels), 2):
            both = [
                (labels[a][e], labels[b][e])
                for e in labels[a]
                if e in labels[b] and labels[a][e] is not None and labels[b][e] is not None
            ]
            table = np.zeros((2, 2))
            for x, y in both:
                table[int(bool(x)), int(bool(y))] += 1
            kappa = cohen_kappa(table) if both else float("nan")
            pairs.append(
                {
                    "a": a,
                    "b": b,
                    "n": len(both),
                    "agree": int(table[0, 0] + table[1, 1]),
                    "kappa": None if math.isnan(kappa) else round(kappa, 3),
                    "note": ""
                    if both and not math.isnan(kappa)
                    else "undefined (too few or constant labels)",
                }
            )
        counts = {name: len(v) for name, v in labels.items()}
        return {"labellers": counts, "pairs": pairs}
