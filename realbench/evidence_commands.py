"""`realbench check-pack --evidence`: the evidence behind each pack's real side, as text or JSON."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from realbench.evidence_report import PackEvidence, pack_evidence
from realbench.taskpack import load_pack


def evidence_json(reports: list[PackEvidence]) -> dict[str, object]:
    return {"packs": [r.row() for r in reports]}


def check_evidence(paths: list[Path], *, as_json: bool, console: Console) -> int:
    """Print the evidence report of each pack; 1 when a selector contradicts the record, else 0.
    A pack that does not load raises its PackError (the CLI reports it)."""
    reports = [pack_evidence(load_pack(p)) for p in paths]
    if as_json:
        print(json.dumps(evidence_json(reports), ensure_ascii=False))
    else:
        for report in reports:
            _print(report, console)
    return 1 if any(r.contradiction_count for r in reports) else 0


def _print(report: PackEvidence, console: Console) -> None:
    allowed = [t for t in report.tasks if t.real_allowed]
    console.print(
        f"[bold]{report.pack}[/]: {report.script_or_better:.0%} of the real steps of {len(allowed)} "
        f"real-allowed task(s) rest on script or better; {report.contradiction_count} contradiction(s)"
        + ("" if report.has_table else " [yellow](no evidence table: contradictions not checked)[/]"),
        highlight=False,
    )
    for t in report.tasks:
        flag = "" if t.real_allowed else " [dim](not real-allowed)[/]"
        console.print(f"  {t.task}: {t.summary()}{flag}", highlight=False, soft_wrap=True)
        for where in t.guesses:
            console.print(f"    [yellow]guess[/] {where}", highlight=False)
        for line in t.contradictions:
            console.print(f"    [red]contradiction[/] {line}", highlight=False, soft_wrap=True)
