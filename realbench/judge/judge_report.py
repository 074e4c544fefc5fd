"""What `realbench judge` prints (a table, or one JSON object) and when it exits non-zero."""

from __future__ import annotations

from typing import Any

from realbench.errors import RunFailedError
from realbench.judge.checks import CHECKS_NAME


def judge_table(summary: dict[str, Any]) -> Any:
    """One row per judge: verdicts, successes, abstentions, endpoint failures, tokens, cost."""
    from rich.table import Table

    table = Table(
        "judge",
        "verdicts",
        "success",
        "abstained",
        "endpoint failures",
        "tokens",
        "cost (USD)",
        title=(
            f"{summary['episodes']} episode(s) judged, {summary['decided_by_checks']} decided by the checks, "
            f"{summary['skipped_unscored']} unscored skipped"
        ),
    )
    failures: dict[str, int] = summary.get("endpoint_failures") or {}
    names = list(dict.fromkeys([*summary["judges"], *failures]))
    for name in names:
        row = summary["judges"].get(name, {})
        table.add_row(
            name,
            str(int(row.get("verdicts", 0))),
            str(int(row.get("success", 0))),
            str(int(row.get("abstained", 0))),
            str(failures.get(name, 0)) if name != CHECKS_NAME else "-",
            str(int(row.get("tokens", 0))),
            f"{row.get('cost_usd', 0.0):.4f}",
        )
    return table


def raise_if_no_verdicts(summary: dict[str, Any], judge_names: list[str]) -> None:
    """Every request to every named judge failed at the endpoint or abstained: nothing was judged."""
    asked = 0
    usable = 0
    for name in judge_names:
        row = summary["judges"].get(name, {})
        asked += int(row.get("verdicts", 0)) + int((summary.get("endpoint_failures") or {}).get(name, 0))
        usable += int(row.get("verdicts", 0)) - int(row.get("abstained", 0))
    if asked and not usable:
        raise RunFailedError(
            f"every verdict of judge(s) {', '.join(judge_names)} was an endpoint failure or an abstention "
            f"({asked} request(s)); nothing was judged",
            hint="check the judge's model and prompt format (`realbench serve-model --check URL --name MODEL`); "
            "analyses skip a judge that only abstains",
        )
