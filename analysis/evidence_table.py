"""The report's evidence table: what public evidence backs the real steps of each task run on phones.

A real episode only means something about the real app as far as its task's real side follows the
app; `realbench check-pack --evidence` measures that per task, and the report shows it beside the
tasks that ran on phones.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import pandas as pd

from realbench.errors import RealbenchError

log = logging.getLogger(__name__)

DEVICE_ENVS = ("real", "clone-on-phone")


def evidence_rows(episodes: pd.DataFrame, packs: Mapping[str, str]) -> pd.DataFrame:
    """One row per (app, task) run on a phone: its real steps' evidence. `packs` maps an app to the
    pack its runs were made from (as the run store records it)."""
    from realbench.evidence_report import load_table, task_evidence
    from realbench.taskpack import load_pack

    if episodes.empty or "env" not in episodes:
        return pd.DataFrame()
    on_phones = episodes[episodes["env"].isin(DEVICE_ENVS)]
    rows = []
    for app, group in on_phones.groupby("app"):
        path = packs.get(str(app))
        if path is None:
            continue
        try:
            pack = load_pack(path)
        except RealbenchError as exc:
            log.info("no evidence for %s: %s", app, exc.message)
            continue
        table = load_table(pack)
        for task_id in sorted(set(group["task"])):
            try:
                ev = task_evidence(pack.task(str(task_id)), table)
            except RealbenchError:
                continue
            rows.append(
                {
                    "app": app,
                    "task": task_id,
                    "real steps": ev.steps,
                    "script or better": f"{ev.script_or_better:.0%}",
                    "levels": ", ".join(f"{n} {k}" for k, n in ev.levels.items()),
                    "guesses": len(ev.guesses),
                    "contradictions": len(ev.contradictions),
                }
            )
    return pd.DataFrame(rows)
