"""Retention per drift profile for the committed learned policies: runs the transfer study at a
chosen scale and prints its table, the wall time of each cell and the machine it ran on.

    .venv/bin/python benchmarks/transfer_study.py --tasks cancel-unpaid-order,pay-unpaid-order \
        --profiles none,relabel --out out/bench-transfer
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import typer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.machine_info import machine_line  # noqa: E402
from realbench.study import StudyConfig  # noqa: E402
from realbench.transfer_study import PROFILES, TransferConfig, TransferStudy  # noqa: E402


def main(
    out: Path = typer.Option(Path("out/bench-transfer")),
    tasks: str = typer.Option("", help="Comma-separated task ids (default: the checkpoints' training tasks)"),
    profiles: str = typer.Option(",".join(PROFILES)),
    clone_repeats: int = typer.Option(2),
    real_repeats: int = typer.Option(1),
    phones: int = typer.Option(2),
) -> None:
    from realbench.agents.policy_net import load_checkpoint
    from realbench.transfer_study import CHECKPOINTS

    wanted = [t for t in tasks.split(",") if t] or load_checkpoint(CHECKPOINTS / "trained")[1].tasks
    study = StudyConfig(
        tasks=wanted,
        clone_repeats=clone_repeats,
        real_repeats=real_repeats,
        budget_hours=1.0,
        phones=phones,
        workers=2,
        replay_workers=2,
        progress=False,
    )
    config = TransferConfig(out=out, profiles=[p for p in profiles.split(",") if p], study=study)
    t0 = time.perf_counter()
    report = TransferStudy(config).run()
    seconds = time.perf_counter() - t0
    data = json.loads((out / "transfer.json").read_text(encoding="utf-8"))
    print(f"machine: {machine_line()}")
    print(f"{len(wanted)} tasks, {len(config.profiles)} profiles, {seconds:.0f} s; report {report}")
    print(
        "| trained policy | profile | tasks | clone gain [95% CI] | phone gain [95% CI] | retention | Fieller set |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in data["rows"]:

        def g(m: float | None, ci: list[float] | None) -> str:
            return "—" if m is None else f"{m:+.2f}" + (f" [{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else "")

        ret = "not estimable" if r["retention"] is None else f"{r['retention']:.2f}"
        print(
            f"| {r['policy']} | {r['profile']} | {r['n_tasks']} | {g(r['gain_clone'], r['gain_clone_ci'])} "
            f"| {g(r['gain_phone'], r['gain_phone_ci'])} | {ret} | {r['interval']} |"
        )


if __name__ == "__main__":
    typer.run(main)
