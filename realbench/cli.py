"""The `realbench` command line. The one module of `realbench` that wires the other packages together.

Commands live beside the code they drive; this module only registers them, configures logging and
turns `RealbenchError` into one clear message and a non-zero exit code.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from realbench.errors import RealbenchError

app = typer.Typer(
    name="realbench",
    help="Sim-to-real testbed for mobile GUI agents: clones, task packs, a device farm and gain-retention analysis.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
console = Console()
err_console = Console(stderr=True)


@app.callback()
def main(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Debug logging.")] = False,
) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def fail(exc: RealbenchError) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {exc.message}", highlight=False, markup=True, soft_wrap=True)
    if exc.hint:
        err_console.print(f"[yellow]hint:[/] {exc.hint}", highlight=False, soft_wrap=True)
    return typer.Exit(code=exc.exit_code)


@app.command("check-pack")
def check_pack_cmd(
    paths: Annotated[list[Path], typer.Argument(help="pack.yaml files or folders under taskpacks/")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Validate task packs: schema, registered clone/verifier names and commit-boundary safety rules."""
    import json

    from clones.base import clone_names, get_clone
    from realbench.errors import PackError
    from realbench.taskpack import check_pack, load_pack

    def has_verifier(clone: str, name: str) -> bool:
        return name in get_clone(clone).verifiers

    def has_check(clone: str, name: str) -> bool:
        return name in get_clone(clone).side_effect_checks

    report: dict[str, object] = {}
    bad = False
    for path in paths:
        try:
            pack = load_pack(path)
            problems = check_pack(
                pack,
                has_clone=lambda n: n in clone_names(),
                has_verifier=has_verifier,
                has_side_effect_check=has_check,
            )
            if problems:
                raise PackError(pack.path or str(path), problems)
        except PackError as exc:
            bad = True
            report[str(path)] = {"ok": False, "problems": [str(p) for p in exc.problems]}
            if not as_json:
                err_console.print(f"[bold red]error:[/] {exc.message}", highlight=False, soft_wrap=True)
            continue
        except RealbenchError as exc:
            bad = True
            report[str(path)] = {"ok": False, "problems": [exc.message]}
            if not as_json:
                err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
            continue
        report[str(path)] = {"ok": True, "tasks": len(pack.tasks), "app": pack.app}
        if not as_json:
            console.print(
                f"[green]ok[/] {pack.path}: {len(pack.tasks)} tasks for {pack.app} ({pack.real_app.package})"
            )
    if as_json:
        print(json.dumps(report, ensure_ascii=False))
    if bad:
        raise typer.Exit(code=2)


AgentOption = Annotated[str, typer.Option("--agent", help="golden | openai | synthetic:NAME | replay:STORE")]


@app.command("run")
def run_cmd(
    pack: Annotated[Path, typer.Option("--pack", help="taskpacks/<app> folder or pack.yaml")],
    out: Annotated[Path, typer.Option("--out", help="Run-store folder (created; re-running resumes)")],
    target: Annotated[str, typer.Option("--target", help="clone | clone-on-phone | real")] = "clone",
    agent: AgentOption = "golden",
    repeats: Annotated[int, typer.Option("--repeats", min=1, help="Runs per task")] = 1,
    seed: Annotated[int, typer.Option("--seed", help="Seed of repeat 0 (repeat r uses seed+r)")] = 0,
    tasks: Annotated[str | None, typer.Option("--tasks", help="Comma-separated task ids, or @FILE (a signal-task list)")] = None,
    workers: Annotated[int, typer.Option("--workers", min=1, help="Parallel headless clone environments")] = 1,
    run_id: Annotated[str | None, typer.Option("--run-id", help="Name of the run inside the store (default AGENT@TARGET)")] = None,
    rig: Annotated[Path | None, typer.Option("--rig", help="Rig file for phone targets (rigs/*.yaml)")] = None,
    scheduler: Annotated[str, typer.Option("--scheduler", help="local | ray (phone targets)")] = "local",
    server_url: Annotated[str | None, typer.Option("--server-url", help="Use a running clone server instead of an in-process one")] = None,
    drift: Annotated[str | None, typer.Option("--drift", help="Drift profile for clone targets (none, mild, heavy)")] = None,
    scale: Annotated[float, typer.Option("--scale", help="Device pixel ratio of headless clones (2.625 ≈ 1080×2400)")] = 2.625,
    base_url: Annotated[str | None, typer.Option("--base-url", help="OpenAI-compatible endpoint (--agent openai)")] = None,
    model: Annotated[str | None, typer.Option("--model", help="Model name at the endpoint")] = None,
    fmt: Annotated[str | None, typer.Option("--format", help="qwen-mobile | ui-tars | json")] = None,
    api_key_env: Annotated[str | None, typer.Option("--api-key-env", help="Environment variable holding the API key")] = None,
    max_attempts: Annotated[int, typer.Option("--max-attempts", min=1, help="Attempts per episode when the device fails")] = 3,
    progress: Annotated[bool, typer.Option("--progress/--no-progress")] = True,
) -> None:
    """Run a task pack on a target with an agent; writes DIR/summary.json. Re-running resumes."""
    from devices.targets import run_pack

    summary = run_pack(
        pack_path=pack,
        out=out,
        target=target,
        agent=agent,
        repeats=repeats,
        seed=seed,
        tasks=tasks,
        workers=workers,
        run_id=run_id,
        rig=rig,
        scheduler=scheduler,
        server_url=server_url,
        drift=drift,
        scale=scale,
        agent_options={"base_url": base_url, "model": model, "fmt": fmt, "api_key_env": api_key_env},
        max_attempts=max_attempts,
        progress=progress,
    )
    _print_summary(summary)


def _print_summary(data: dict[str, object]) -> None:
    from rich.table import Table

    rate = data.get("success_rate")
    rate_text = f"{rate:.1%}" if isinstance(rate, float) else "n/a"
    label = " [magenta](synthetic policy)[/]" if data.get("synthetic") else ""
    console.print(
        f"run [bold]{data['run_id']}[/]{label}: {data['successes']}/{data['episodes']} successes ({rate_text}), "
        f"{data['aborted']} aborted, abort rate {float(data['abort_rate']):.1%}"  # type: ignore[arg-type]
    )
    outcomes = data.get("outcomes") or {}
    if isinstance(outcomes, dict) and outcomes:
        table = Table("outcome", "attempts")
        for name, count in outcomes.items():
            table.add_row(str(name), str(count))
        console.print(table)


@app.command("show")
def show_cmd(
    out: Annotated[Path, typer.Argument(help="A run-store folder")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
) -> None:
    """Summarise a run store: per run and per task successes, outcomes and aborts."""
    import json

    from rich.table import Table

    from realbench.runner import summarize
    from realbench.store import RunStore

    store = RunStore(out, create=False)
    summaries = [summarize(store, r["run_id"]).data for r in store.runs()]
    if as_json:
        print(json.dumps({"store": str(out), "runs": summaries}, ensure_ascii=False))
        return
    if not summaries:
        console.print(f"{out}: no runs yet")
        return
    for data in summaries:
        _print_summary(data)
        table = Table("task", "episodes", "successes", "rate", "aborted", title=f"{data['run_id']} by task")
        tasks = data["tasks"]
        assert isinstance(tasks, dict)
        for task_id, t in tasks.items():
            rate = t["successes"] / t["episodes"] if t["episodes"] else float("nan")
            table.add_row(task_id, str(t["episodes"]), str(t["successes"]), f"{rate:.0%}", str(t["aborted"]))
        console.print(table)


@app.command("clone-stats")
def clone_stats_cmd(
    clone: Annotated[str, typer.Argument(help="Clone name (train_ticketing, bank)")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
) -> None:
    """Routes, interactive actions and page transitions of a clone, measured by crawling it."""
    import json

    from clones.base import get_clone
    from clones.stats import crawl

    stats = crawl(get_clone(clone))
    if as_json:
        print(json.dumps(stats.as_dict(), ensure_ascii=False))
        return
    console.print(
        f"[bold]{clone}[/]: {stats.routes} routes, {stats.interactive_actions} interactive actions, "
        f"{stats.transitions} page transitions ({stats.states_explored} states explored)"
    )
    if stats.unreached_routes:
        console.print(f"[yellow]declared but not reached:[/] {', '.join(stats.unreached_routes)}")
    for err in stats.errors:
        err_console.print(f"[red]crawl error:[/] {err}")
    if stats.errors:
        raise typer.Exit(code=1)


def run() -> None:
    """Entry point that maps realbench errors to clean messages (used by `python -m realbench`)."""
    try:
        app()
    except RealbenchError as exc:
        raise fail(exc) from None


if __name__ == "__main__":
    run()
