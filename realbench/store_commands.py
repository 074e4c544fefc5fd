"""`realbench store check|repair DIR`: compare a run store's index with its episode folders, and
rebuild the index from them (re-queueing damaged episodes)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

store_app = typer.Typer(
    help="Check a run store against its episode folders; repair (rebuild) its index.",
    no_args_is_help=True,
)
console = Console()

StoreDir = Annotated[Path, typer.Argument(help="A run-store folder (the --out of `realbench run`)")]
AsJson = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
SHOWN = 20  # names listed per kind of problem; the rest are counted


def _listed(names: list[str]) -> str:
    more = f" … and {len(names) - SHOWN} more" if len(names) > SHOWN else ""
    return "\n".join(f"  {n}" for n in names[:SHOWN]) + more


@store_app.command("check")
def check_cmd(out: StoreDir, as_json: AsJson = False) -> None:
    """Report folders the index lost and damaged episodes; exit 1 when there are any."""
    from realbench.folder_checks import require_run_store
    from realbench.store import RunStore
    from realbench.store_check import check_store

    require_run_store(out)  # a wrong path is a set-up mistake (exit 2); problems found exit 1
    store = RunStore(out, create=True, check=False)
    try:
        result = check_store(store)
    finally:
        store.close()
    if as_json:
        print(json.dumps(result.as_dict(), ensure_ascii=False))
    else:
        console.print(
            f"{out}: {result.indexed} indexed episode(s), {result.folders} complete episode folder(s)",
            soft_wrap=True,
        )
        if result.unknown:
            console.print(
                f"[red]{len(result.unknown)} folder(s) not in the index:[/]\n{_listed(result.unknown)}"
            )
        if result.damaged:
            lines = [f"{k}: {v}" for k, v in result.damaged.items()]
            console.print(f"[red]{len(result.damaged)} damaged episode(s):[/]\n{_listed(lines)}")
        if result.ok:
            console.print("[green]ok[/]: the index and the episode folders agree")
        else:
            console.print(
                f"run `realbench store repair {out}` to rebuild the index and re-queue damaged episodes"
            )
    if not result.ok:
        raise typer.Exit(code=1)


@store_app.command("repair")
def repair_cmd(out: StoreDir, as_json: AsJson = False) -> None:
    """Rebuild the index from complete episode folders; re-queue damaged episodes (next `run` redoes them)."""
    from realbench.errors import StoreError
    from realbench.store import RunStore
    from realbench.store_check import repair_store

    if not (out / "episodes").is_dir():
        raise StoreError(f"{out} has no episodes/ folder to rebuild from", hint="pass a run-store folder")
    index = out / "index.sqlite"
    if index.exists():
        try:
            store = RunStore(out, writer="realbench store repair", check=False)
        except StoreError as exc:
            from realbench.store_lock import StoreLinkError, StoreLockedError, StoreReadOnlyError
            from realbench.store_paths import StoreFullError

            if isinstance(exc, StoreLockedError | StoreLinkError | StoreReadOnlyError | StoreFullError):
                raise
            # an index SQLite cannot open at all: keep it aside and start a fresh one
            index.rename(out / f"index.sqlite.damaged-{int(time.time())}")
            store = RunStore(out, writer="realbench store repair", check=False)
    else:
        store = RunStore(out, writer="realbench store repair", check=False)
    try:
        report = repair_store(store)
    finally:
        store.close()
    if as_json:
        print(json.dumps(report.as_dict(), ensure_ascii=False))
    else:
        console.print(
            f"{out}: {len(report.restored)} episode(s) restored to the index, {len(report.requeued)} damaged "
            f"episode(s) re-queued, {len(report.quarantined)} folder(s) moved to damaged/, "
            f"{len(report.runs_restored)} run(s) restored",
            soft_wrap=True,
        )
        if report.refused:
            lines = [f"{where} ({why})" for where, why in report.refused.items()]
            console.print(
                f"[red]{len(report.refused)} folder(s) could not be indexed[/] and were set aside "
                f"(the store is usable without them):\n{_listed(lines)}",
                soft_wrap=True,
            )
    if not report.ok:
        raise typer.Exit(code=1)
