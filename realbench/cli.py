"""The `realbench` command line. The one module of `realbench` that wires the other packages together.

Commands live beside the code they drive; this module only registers them, configures logging and
turns `RealbenchError` into one clear message and a non-zero exit code.
"""

from __future__ import annotations

import logging
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from realbench.errors import RealbenchError


def _hide_flag_type() -> None:
    """Typer's rich help shows `<bool>` beside a flag as if it took a value; a flag takes none."""
    from typer.core import TyperOption

    shown = TyperOption.display_type_rich

    def display_type_rich(self: TyperOption, ctx: typer.Context) -> str | None:
        return None if self.is_flag else shown(self, ctx)

    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign,assignment]


_hide_flag_type()

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
    rig: Annotated[
        Path | None, typer.Option("--rig", help="Also list tasks this rig's accounts cannot instantiate")
    ] = None,
    list_tasks: Annotated[
        bool, typer.Option("--list", help="Also list every task: id and instruction (what --tasks takes)")
    ] = False,
    evidence: Annotated[
        bool,
        typer.Option(
            "--evidence",
            help="Instead: how well public evidence backs each task's real steps, and the selectors that "
            "contradict the evidence of record (exit 1 when any does)",
        ),
    ] = False,
) -> None:
    """Validate task packs: schema, registered clone/verifier names, verifier arguments and answers
    against the verifiers' contracts, setup data, commit-boundary safety rules, and safety by effect
    (each golden plan run on the clone: account changes only behind a boundary)."""
    import json

    if evidence:
        from realbench.evidence_commands import check_evidence

        raise typer.Exit(code=check_evidence(paths, as_json=as_json, console=console))

    from clones.contracts import pack_checks
    from realbench.errors import PackError
    from realbench.taskpack import check_pack, load_pack

    report: dict[str, object] = {}
    bad = False
    for path in paths:
        try:
            pack = load_pack(path)
            problems = check_pack(pack, **pack_checks())
            if problems:
                raise PackError(pack.path or str(path), problems)
        except PackError as exc:
            bad = True
            shown = [str(p)[:500] for p in exc.problems[:200]]
            report[str(path)] = {"ok": False, "problems": shown, "problem_count": len(exc.problems)}
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
        if list_tasks:
            report[str(path)]["task_ids"] = [t.id for t in pack.tasks]  # type: ignore[index]
            if not as_json:
                for t in pack.tasks:
                    console.print(f"  {t.id}  [dim]{t.instruction}[/]", highlight=False, soft_wrap=True)
        if rig is not None:
            from devices.fixtures import uninstantiable
            from devices.rig import load_rig

            gaps = uninstantiable(pack, load_rig(rig))
            report[str(path)]["uninstantiable"] = [  # type: ignore[index]
                {"task": g.task, "account": g.account, "gaps": list(g.gaps)} for g in gaps
            ]
            if not as_json:
                console.print(f"{len(gaps)} task(s) the accounts of {rig} cannot instantiate")
                for g in gaps:
                    console.print(f"  [yellow]{g.describe()}[/]", highlight=False, soft_wrap=True)
    if as_json:
        print(json.dumps(report, ensure_ascii=False))
    if bad:
        raise typer.Exit(code=2)


@app.command("certify")
def certify_cmd(
    rig: Annotated[Path, typer.Option("--rig", help="Rig file (rigs/*.yaml)")],
    pack: Annotated[Path, typer.Option("--pack", help="taskpacks/<app> folder or pack.yaml")],
    tasks: Annotated[str | None, typer.Option("--tasks", help="Comma-separated task ids, or @FILE")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    out: Annotated[
        Path | None, typer.Option("--out", help="Folder for the certification file and pages")
    ] = None,
    confirm_manual: Annotated[
        bool, typer.Option("--confirm-manual", help="The tasks' manual preconditions hold on the phones")
    ] = False,
) -> None:
    """Run each task's real setup and real golden plan on every phone (interlock armed); certify what holds.

    Exit status: 0 every runnable task certified on every phone;
    1 a runnable task did not certify (the certification file and pages are written anyway);
    2 a bad rig, pack or task list.
    """
    import json

    from devices.certify import certify_command

    cert = certify_command(rig=rig, pack=pack, tasks=tasks, out=out, confirm_manual=confirm_manual)
    summary = cert.summary()
    if as_json:
        print(json.dumps(summary, ensure_ascii=False))
    else:
        for row in summary["tasks"]:
            mark = (
                "[green]certified[/]"
                if row["certified"]
                else ("[red]failed[/]" if row["runnable"] else "[dim]skipped[/]")
            )
            console.print(
                f"{mark} {row['phone']} {row['task']} {row['failed_step'] or ''} {row['reason']}"
                + (f" [dim](evidence: {row['evidence']})[/]" if row.get("evidence") else ""),
                soft_wrap=True,
            )
        console.print(f"certified {summary['certified']} of {summary['total']}")
    raise typer.Exit(code=cert.exit_code())


AgentOption = Annotated[
    str,
    typer.Option("--agent", help="golden | openai | synthetic:NAME | replay:STORE[#RUN_ID] | policy:DIR"),
]


@app.command("run")
def run_cmd(
    pack: Annotated[Path, typer.Option("--pack", help="taskpacks/<app> folder or pack.yaml")],
    out: Annotated[Path, typer.Option("--out", help="Run-store folder (created; re-running resumes)")],
    target: Annotated[str, typer.Option("--target", help="clone | clone-on-phone | real")] = "clone",
    agent: AgentOption = "golden",
    repeats: Annotated[int, typer.Option("--repeats", min=1, help="Runs per task")] = 1,
    seed: Annotated[int, typer.Option("--seed", help="Seed of repeat 0 (repeat r uses seed+r)")] = 0,
    tasks: Annotated[
        str | None, typer.Option("--tasks", help="Comma-separated task ids, or @FILE (a signal-task list)")
    ] = None,
    workers: Annotated[
        int, typer.Option("--workers", min=1, help="Parallel headless clone environments")
    ] = 1,
    run_id: Annotated[
        str | None,
        typer.Option(
            "--run-id",
            help="Name of the run inside the store (default: AGENT@TARGET with every character other than "
            "letters, digits, '.', '_' and '-' written '-', e.g. openai-base-clone, golden-real)",
        ),
    ] = None,
    rig: Annotated[
        Path | None, typer.Option("--rig", help="Rig file for phone targets (rigs/*.yaml)")
    ] = None,
    scheduler: Annotated[str, typer.Option("--scheduler", help="local | ray (phone targets)")] = "local",
    server_url: Annotated[
        str | None,
        typer.Option("--server-url", help="Use a running clone server instead of an in-process one"),
    ] = None,
    drift: Annotated[
        str | None, typer.Option("--drift", help="Drift profile for clone targets (none, mild, heavy)")
    ] = None,
    scale: Annotated[
        float, typer.Option("--scale", help="Device pixel ratio of headless clones (2.625 ≈ 1080×2400)")
    ] = 2.625,
    base_url: Annotated[
        str | None, typer.Option("--base-url", help="OpenAI-compatible endpoint (--agent openai)")
    ] = None,
    model: Annotated[str | None, typer.Option("--model", help="Model name at the endpoint")] = None,
    fmt: Annotated[
        str | None, typer.Option("--format", help="qwen-mobile | ui-tars | json (default: qwen-mobile)")
    ] = None,
    api_key_env: Annotated[
        str | None,
        typer.Option(
            "--api-key-env",
            help="Environment variable holding the API key (default: REALBENCH_API_KEY or OPENAI_API_KEY if set, else no key)",
        ),
    ] = None,
    max_pixels: Annotated[
        int | None,
        typer.Option(
            "--max-pixels",
            help="Pixel budget per screenshot (default: the format's: 1003520 for qwen-mobile and json, "
            "12845056 for ui-tars)",
        ),
    ] = None,
    history_images: Annotated[
        int | None,
        typer.Option(
            "--history-images",
            min=1,
            help="Screenshots per request, current included (default: the format's window)",
        ),
    ] = None,
    temperature: Annotated[
        float | None, typer.Option("--temperature", min=0.0, help="Sampling temperature (default: 0.0)")
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option("--max-tokens", min=1, help="Largest reply in tokens (default: 512)")
    ] = None,
    max_attempts: Annotated[
        int,
        typer.Option(
            "--max-attempts",
            min=1,
            help="Attempts per episode when the environment fails (an unscored abort), across phones; "
            "then the episode is given up",
        ),
    ] = 3,
    retry_given_up: Annotated[
        bool,
        typer.Option(
            "--retry-given-up", help="On a rerun, give given-up episodes another --max-attempts attempts"
        ),
    ] = False,
    progress: Annotated[
        bool, typer.Option("--progress/--no-progress", help="Show a progress bar on stderr")
    ] = True,
    confirm_manual: Annotated[
        bool,
        typer.Option("--confirm-manual", help="The tasks' manual preconditions hold (recorded in the run)"),
    ] = False,
    certified: Annotated[
        Path | None,
        typer.Option("--certified", help="Run only tasks this certification file certifies (real)"),
    ] = None,
    video: Annotated[
        bool, typer.Option("--video", help="Record each phone episode's screen (video.mp4 with the episode)")
    ] = False,
) -> None:
    """Run a task pack on a target with an agent; writes DIR/summary.json. Re-running resumes."""
    from devices.pack_run import run_pack
    from realbench.run_config import AgentOptions, RunConfig

    config = RunConfig.of(
        pack=pack,
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
        agent_options=AgentOptions(
            base_url=base_url,
            model=model,
            fmt=fmt,
            api_key_env=api_key_env,
            max_pixels=max_pixels,
            history_images=history_images,
            temperature=temperature,
            max_tokens=max_tokens,
        ),
        max_attempts=max_attempts,
        retry_given_up=retry_given_up,
        progress=progress,
        confirm_manual=confirm_manual,
        certified=certified,
        video=video,
    )
    from realbench.runner import raise_if_unusable

    summary = run_pack(config)
    _print_summary(summary)
    _print_skipped(summary)
    raise_if_unusable(summary)


def _print_summary(data: dict[str, object]) -> None:
    from rich.table import Table

    rate = data.get("success_rate")
    rate_text = f"{rate:.1%}" if isinstance(rate, float) else "n/a"
    label = " [magenta](synthetic policy)[/]" if data.get("synthetic") else ""
    console.print(
        f"run [bold]{data['run_id']}[/]{label}: {data['successes']}/{data['episodes']} successes ({rate_text}), "
        f"{data['aborted']} aborted, abort rate {float(data['abort_rate']):.1%}"  # type: ignore[arg-type]
        + (f", [yellow]{data['damaged']} damaged[/]" if data.get("damaged") else "")
    )
    if data.get("not_run"):
        console.print(
            f"[red]{data['not_run']} episode(s) not run[/]: every phone was quarantined "
            "(`realbench devices --rig …` shows why)",
            soft_wrap=True,
        )
    if data.get("interrupted"):
        console.print(
            f"[yellow]{data['interrupted']} episode(s) interrupted[/] (stopped before they finished; "
            "rerunning the same command resumes them)",
            soft_wrap=True,
        )
    reasons = data.get("given_up_reasons") or {}
    if isinstance(reasons, dict) and reasons:
        console.print(
            f"[yellow]{data.get('given_up')} episode(s) given up[/] (every attempt failed on the environment; "
            "`--retry-given-up` retries them):",
            soft_wrap=True,
        )
        for reason, count in reasons.items():
            console.print(f"  {count}× {reason}", highlight=False, soft_wrap=True)
    outcomes = data.get("outcomes") or {}
    if isinstance(outcomes, dict) and outcomes:
        table = Table("outcome", "attempts")
        for name, count in outcomes.items():
            table.add_row(str(name), str(count))
        console.print(table)


def _print_skipped(data: dict[str, object]) -> None:
    skipped = data.get("skipped") or []
    if isinstance(skipped, list) and skipped:
        from rich.table import Table

        table = Table("task", "reason", title=f"{data['run_id']}: skipped on the real side")
        for s in skipped:
            table.add_row(str(s["task"]), str(s["reason"]))
        console.print(table)


@app.command("show")
def show_cmd(
    out: Annotated[Path, typer.Argument(help="A run-store folder")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object")] = False,
) -> None:
    """Summarise a run store: per run and per task successes, outcomes and aborts."""
    import json

    from rich.table import Table

    from realbench.folder_checks import require_run_store
    from realbench.runner import summarize
    from realbench.store import RunStore

    require_run_store(out)  # a wrong path is a set-up mistake (exit 2), not a damaged store
    store = RunStore(out, create=False)
    summaries = [summarize(store, r["run_id"]).data for r in store.runs()]
    damaged = store.damaged()
    if as_json:
        print(json.dumps({"store": str(out), "runs": summaries, "damaged": damaged}, ensure_ascii=False))
        return
    if damaged:
        err_console.print(
            f"[yellow]{len(damaged)} damaged episode(s)[/] (left out of the rates below; "
            f"`realbench store check {out}` names them, `store repair` re-queues them)",
            soft_wrap=True,
        )
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
        _print_skipped(data)


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


TokenEnvOption = Annotated[
    str,
    typer.Option("--token-env", help="Env var holding the token clients must send (needed off loopback)"),
]
AllowHostOption = Annotated[
    list[str] | None, typer.Option("--allow-host", help="Extra Host header name to accept (repeatable)")
]
MaxBodyOption = Annotated[int, typer.Option("--max-body", min=1, help="Largest request body in bytes (413)")]
MaxSessionsOption = Annotated[int, typer.Option("--max-sessions", min=1, help="Live sessions at most (429)")]
IdleOption = Annotated[
    float, typer.Option("--idle-timeout", min=1, help="Seconds before an idle session expires")
]


@app.command("serve")
def serve_cmd(
    host: Annotated[str, typer.Option("--host", help="Address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on (0 picks a free one)")] = 8765,
    token_env: TokenEnvOption = "REALBENCH_SERVER_TOKEN",
    allow_host: AllowHostOption = None,
    max_body: MaxBodyOption = 4 * 1024 * 1024,
    max_sessions: MaxSessionsOption = 1024,
    idle_timeout: IdleOption = 3600.0,
) -> None:
    """Run the clone server: many sessions of every clone, pages at /s/<session>, JSON API at /api."""
    from clones.server import serve
    from realbench.http_guard import ServerLimits

    limits = ServerLimits(max_body_bytes=max_body, max_sessions=max_sessions, idle_timeout_s=idle_timeout)
    serve(
        host,
        port,
        announce=lambda url: console.print(f"clone server at {url}", soft_wrap=True),
        limits=limits,
        token_env=token_env,
        allow_hosts=tuple(allow_host or ()),
    )


@app.command("rollout-service")
def rollout_service_cmd(
    host: Annotated[str, typer.Option("--host", help="Address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port to listen on (0 picks a free one)")] = 8770,
    workers: Annotated[
        int, typer.Option("--workers", min=1, help="Environment workers (one browser each)")
    ] = 2,
    backend: Annotated[
        str, typer.Option("--backend", help="process (local) or ray (a Ray cluster)")
    ] = "process",
    ray_address: Annotated[
        str | None, typer.Option("--ray-address", help="Ray cluster address (default: start a local one)")
    ] = None,
    pack_dir: Annotated[
        list[Path] | None,
        typer.Option(
            "--pack-dir", help="Folder whose packs clients may name (besides taskpacks/; repeatable)"
        ),
    ] = None,
    token_env: TokenEnvOption = "REALBENCH_SERVER_TOKEN",
    allow_host: AllowHostOption = None,
    max_body: MaxBodyOption = 4 * 1024 * 1024,
    max_envs: Annotated[
        int, typer.Option("--max-envs", min=1, help="Live environments at most (429)")
    ] = 1024,
    idle_timeout: IdleOption = 3600.0,
    shutdown_timeout: Annotated[
        float,
        typer.Option("--shutdown-timeout", min=1, help="Seconds a shutdown waits before killing workers"),
    ] = 20.0,
) -> None:
    """Serve clone environments to RL trainers over HTTP (create/reset/step/snapshot/restore; see docs/rl.md)."""
    from devices.rl.service import serve_rollouts
    from realbench.http_guard import ServerLimits

    serve_rollouts(
        host=host,
        port=port,
        workers=workers,
        backend=backend,
        ray_address=ray_address,
        pack_dirs=tuple(pack_dir or ()),
        token_env=token_env,
        allow_hosts=tuple(allow_host or ()),
        limits=ServerLimits(max_body_bytes=max_body, max_sessions=max_envs, idle_timeout_s=idle_timeout),
        shutdown_timeout_s=shutdown_timeout,
    )


@app.command("train")
def train_cmd(
    pack: Annotated[
        str, typer.Option("--pack", help="Task pack (a pack.yaml, its folder or a name under taskpacks/)")
    ],
    out: Annotated[
        Path, typer.Option("--out", help="Checkpoint folder (--agent policy:DIR runs it; re-running resumes)")
    ],
    tasks: Annotated[
        str | None,
        typer.Option(
            "--tasks", help="Comma-separated training task ids (default: the first 8 without an answer)"
        ),
    ] = None,
    heldout: Annotated[
        str | None,
        typer.Option("--heldout", help="Comma-separated held-out task ids, evaluated on the curve"),
    ] = None,
    updates: Annotated[
        int, typer.Option("--updates", min=0, help="Policy updates (0 writes the untrained base)")
    ] = 30,
    envs: Annotated[
        int, typer.Option("--envs", min=2, help="Rollouts per task instance (the GRPO group)")
    ] = 8,
    batch_tasks: Annotated[int, typer.Option("--batch-tasks", min=1, help="Task instances per update")] = 8,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the initial weights and of every draw")] = 0,
    drift_randomise: Annotated[
        str | None,
        typer.Option(
            "--drift-randomise", help="Comma-separated drift profiles each training episode draws from"
        ),
    ] = None,
    lr: Annotated[float, typer.Option("--lr", min=0.0, help="Adam learning rate")] = 0.02,
    max_steps: Annotated[
        int, typer.Option("--max-steps", min=1, help="Cap on each episode's step budget")
    ] = 10,
    eval_every: Annotated[
        int, typer.Option("--eval-every", min=1, help="Greedy evaluation every N updates")
    ] = 5,
    epochs: Annotated[
        int, typer.Option("--epochs", min=1, help="Optimiser passes over each update's rollouts")
    ] = 4,
    entropy: Annotated[float, typer.Option("--entropy", min=0.0, help="Entropy bonus weight")] = 0.01,
    entropy_all: Annotated[
        bool,
        typer.Option(
            "--entropy-all",
            help="The entropy bonus over every sampled step, not only those of groups whose rewards differ",
        ),
    ] = False,
    temperature: Annotated[
        float,
        typer.Option(
            "--temperature", min=0.01, help="Sampling temperature of the rollouts (below 1: nearer greedy)"
        ),
    ] = 1.0,
    eval_seeds: Annotated[
        str, typer.Option("--eval-seeds", help="Comma-separated instance seeds of the greedy evaluations")
    ] = "0,1",
    prefix_starts: Annotated[
        float,
        typer.Option(
            "--prefix-starts",
            min=0.0,
            max=1.0,
            help="Share of groups started where the task's reverse curriculum stands (after a prefix of its golden plan)",
        ),
    ] = 0.0,
    prefix_temperature: Annotated[
        float | None,
        typer.Option(
            "--prefix-temperature",
            min=0.01,
            help="Sampling temperature of the groups started after a prefix (default: --temperature)",
        ),
    ] = None,
    row_context: Annotated[
        bool,
        typer.Option(
            "--row-context",
            help="The policy also reads each control's row labels (the words beside a switch, a passenger's name beside 退票)",
        ),
    ] = False,
    progress: Annotated[bool, typer.Option("--progress/--no-progress")] = True,
) -> None:
    """Train a small element policy by RL on the clone, browser-free (needs the train extra: torch)."""
    from devices.rl.policy_train import TrainConfig, train
    from realbench.agents.policy_net import PolicyShape

    def ids(text: str | None) -> list[str]:
        return [t.strip() for t in (text or "").split(",") if t.strip()]

    config = TrainConfig(
        pack=pack,
        tasks=ids(tasks),
        heldout=ids(heldout),
        updates=updates,
        group=envs,
        batch_tasks=batch_tasks,
        seed=seed,
        drift_randomise=ids(drift_randomise),
        lr=lr,
        max_steps=max_steps,
        eval_every=eval_every,
        epochs=epochs,
        entropy=entropy,
        entropy_all=entropy_all,
        temperature=temperature,
        eval_seeds=[int(s) for s in ids(eval_seeds)],
        prefix_starts=prefix_starts,
        prefix_temperature=prefix_temperature,
        shape=PolicyShape(context=row_context),
    )
    result = train(config, out, progress=progress)
    first, last = result.curve[0], result.curve[-1]
    console.print(
        f"[bold]{result.card.description}[/] -> {out} (policy:{result.card.name}@{result.card.weights_sha256[:12]}); "
        f"greedy clone success on the training tasks {first.train_success:.2f} -> {last.train_success:.2f}, "
        f"{result.episodes} episodes in {result.seconds:.0f} s"
    )


vphone_app = typer.Typer(
    help="Virtual phones (a test rig speaking ADB/uiautomator2, not phones): up, down, ls.",
    no_args_is_help=True,
)
app.add_typer(vphone_app, name="vphone")

from realbench.store_commands import store_app  # noqa: E402 - registered beside the other sub-apps

app.add_typer(store_app, name="store")


@vphone_app.command("up")
def vphone_up_cmd(
    n: Annotated[int, typer.Option("-n", "--n", help="How many phones.")] = 1,
    drift: Annotated[
        str, typer.Option(help="Drift profile of the app clones (none, mild, heavy, relabel).")
    ] = "none",
    apps: Annotated[
        list[str] | None, typer.Option("--apps", help="App packages to install (default: all cloned apps).")
    ] = None,
    screens: Annotated[
        str, typer.Option(help="App screens: clone (Chromium), static (PIL placeholder) or auto.")
    ] = "auto",
    profile: Annotated[
        str | None, typer.Option(help="Device profile from devices/profiles (default generic-1080x2400).")
    ] = None,
    adb_port: Annotated[
        int | None, typer.Option(help="adb server port (default: $ANDROID_ADB_SERVER_PORT or 5037).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Start virtual phones in a background process, `adb connect` them and print their serials."""
    import json

    from devices.virtual.cli import up

    record = up(n, drift=drift, apps=apps, screens=screens, profile=profile, adb_port=adb_port)
    if as_json:
        print(json.dumps(record, ensure_ascii=False))
        return
    for phone in record["phones"]:
        print(phone["serial"])
    err_console.print(
        f"virtual phones (device_kind virtual-phone), host pid {record['pid']}, control {record['control_url']}"
    )


@vphone_app.command("down")
def vphone_down_cmd() -> None:
    """Disconnect and stop every virtual phone `vphone up` started."""
    from devices.virtual.cli import down

    hosts = down()
    err_console.print(
        f"stopped {sum(len(h['phones']) for h in hosts)} virtual phone(s) in {len(hosts)} host process(es)"
    )


@vphone_app.command("ls")
def vphone_ls_cmd(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """List the virtual phones `vphone up` started, with liveness and foreground app."""
    import json

    from devices.virtual.cli import ls

    hosts = ls()
    if as_json:
        print(json.dumps(hosts, ensure_ascii=False))
        return
    for host in hosts:
        console.print(
            f"host pid {host['pid']} ({'alive' if host['alive'] else 'dead'}) control {host['control_url']}"
        )
        for phone in host["phones"]:
            console.print(
                f"  {phone['serial']}  {phone['name']}  drift={phone['drift']}  alive={phone['alive']}  foreground={phone['foreground']}",
                soft_wrap=True,
            )


@app.command("devices")
def devices_cmd(
    rig: Annotated[Path, typer.Option("--rig", help="Rig file (rigs/*.yaml)")],
    check: Annotated[
        bool, typer.Option("--check/--no-check", help="Connect and health-check each free phone")
    ] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """The rig's phones: serial, model, health, app versions, leased / quarantined, flake rate.
    Exits 0 only when every phone is ready (with --check), so scripts can wait until all are ok."""
    import json

    from devices.farm.device_table import device_rows, render_table
    from devices.rig import load_rig
    from devices.vphone_check import require_vphone_up

    loaded = load_rig(rig)
    require_vphone_up(loaded, command="realbench devices")  # not throwaway phones gone on exit
    rows = device_rows(loaded, check=check)
    if as_json:
        print(json.dumps(rows, ensure_ascii=False))
    else:
        from realbench.full_width import print_full_width

        print_full_width(console, render_table(loaded.name, rows))  # piped: serials uncut
    if check:
        from devices.farm.device_table import raise_if_unhealthy

        raise_if_unhealthy(
            rows, expected=len(loaded.phones) or (loaded.virtual.count if loaded.virtual else 0)
        )


@app.command("select")
def select_cmd(
    clone: Annotated[
        list[Path], typer.Option("--clone", help="Clone run stores, or one tidy table (.csv/.parquet)")
    ],
    base: Annotated[str, typer.Option("--base", help="Base model name")],
    trained: Annotated[str, typer.Option("--trained", help="Clone-trained model name")],
    budget_hours: Annotated[float, typer.Option("--budget-hours", help="Device-hour budget")],
    runs: Annotated[int, typer.Option("--runs", min=1, help="Device runs per task and model")] = 3,
    episode_seconds: Annotated[
        float | None, typer.Option("--episode-seconds", help="Episode length (default: from the runs)")
    ] = None,
    allocation: Annotated[str, typer.Option("--allocation", help="neyman | proportional")] = "neyman",
    alpha: Annotated[
        float, typer.Option("--alpha", help="Level of the gain/loss test that defines strata")
    ] = 0.1,
    replay_k: Annotated[
        int, typer.Option("--replay-k", min=1, help="Replays per trace in the reproducibility screen")
    ] = 3,
    replayer: Annotated[
        str | None,
        typer.Option("--replayer", help="module:factory of a clone replayer (screen skipped without)"),
    ] = None,
    replay_pack: Annotated[
        Path | None,
        typer.Option(
            "--replay-pack", help="Replay recorded traces on this pack's headless clone (the screen)"
        ),
    ] = None,
    controls: Annotated[
        int, typer.Option("--controls", min=0, help="At least this many stable-failure controls (both-fail)")
    ] = 0,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    out: Annotated[
        Path | None, typer.Option("--out", help="Write the signal-task list (.json or .yaml)")
    ] = None,
    pilot: Annotated[
        list[Path] | None,
        typer.Option(
            "--pilot", help="A first phone batch (run stores or a retention table): Neyman's spread of z"
        ),
    ] = None,
    prior_sz: Annotated[
        str | None, typer.Option("--prior-sz", help="Your guess of the spread of z per stratum: gain=0.3,...")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    pack: Annotated[
        Path | None,
        typer.Option(
            "--pack",
            help="Task pack: its tasks not allowed on a real account are left out (default: --replay-pack, "
            "else the pack the clone runs recorded)",
        ),
    ] = None,
    certified: Annotated[
        Path | None,
        typer.Option("--certified", help="Certification file: only tasks certified on some phone are picked"),
    ] = None,
) -> None:
    """Stratify tasks by clone outcomes, screen reproducibility, allocate the device budget.
    Only tasks a real run would start are picked; the ones left out are listed with why."""
    from contextlib import ExitStack

    from analysis.analysis_commands import select_command
    from devices.phone_filter import phone_filter

    allowed = phone_filter(pack or replay_pack, certified, [c for c in clone if c.is_dir()])
    with ExitStack() as stack:
        chosen: object = replayer
        if replay_pack is not None:
            from devices.clone_replayer import CloneReplayer

            chosen = stack.enter_context(CloneReplayer(replay_pack))
        select_command(
            clone,
            base=base,
            trained=trained,
            budget_hours=budget_hours,
            runs=runs,
            episode_seconds=episode_seconds,
            allocation=allocation,
            alpha=alpha,
            replay_k=replay_k,
            replayer=chosen,  # type: ignore[arg-type]
            controls=controls,
            seed=seed,
            out=out,
            pilot=pilot or [],
            prior_sz=prior_sz,
            as_json=as_json,
            console=console,
            not_runnable=allowed.excluded,
            phone_filter=allowed.source,
        )


@app.command("audit")
def audit_cmd(
    runs: Annotated[list[Path] | None, typer.Argument(help="Run stores with judge verdicts")] = None,
    table: Annotated[
        Path | None, typer.Option("--table", help="Tidy table: task, model, judge, truth, verdict, steps")
    ] = None,
    sampled_by_verdict: Annotated[
        bool, typer.Option("--sampled-by-verdict", help="Validation drawn by judge verdict: double sampling")
    ] = False,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    plan_labels: Annotated[
        int | None,
        typer.Option("--plan-labels", min=1, help="Plan which N unlabelled episodes people should label"),
    ] = None,
    plan_out: Annotated[
        Path | None,
        typer.Option(
            "--plan-out", help="Where to write the plan (default: label-plan.json in the first store)"
        ),
    ] = None,
    judge: Annotated[str | None, typer.Option("--judge", help="Judge the labelling plan is for")] = None,
    borrow_from: Annotated[
        str | None,
        typer.Option(
            "--borrow-from",
            help="A side (e.g. clone) whose labels stand in where a side has none; never done unless asked",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Audit judges against ground truth: confusion, Se/Sp/PPV, error by length/model/app, κ, corrections.
    With --plan-labels N: which N episodes to label (double sampling by judge verdict and side)."""
    from analysis.analysis_commands import audit_command

    inputs = [table] if table is not None else list(runs or [])
    audit_command(
        inputs,
        sampled_by_verdict=sampled_by_verdict,
        seed=seed,
        plan_labels=plan_labels,
        plan_out=plan_out,
        judge=judge,
        as_json=as_json,
        console=console,
        borrow_from=borrow_from,
    )


@app.command("retention")
def retention_cmd(
    base: Annotated[str, typer.Option("--base", help="Base model name")],
    trained: Annotated[str, typer.Option("--trained", help="Clone-trained model name")],
    table: Annotated[
        Path | None, typer.Option("--table", help="Tidy table: task, stratum, model, env, run, success")
    ] = None,
    clone: Annotated[list[Path] | None, typer.Option("--clone", help="Clone-side run stores")] = None,
    real: Annotated[list[Path] | None, typer.Option("--real", help="Device-side run stores")] = None,
    population: Annotated[
        str | None, typer.Option("--population", help="Stratum sizes for R_pop: gain=20,loss=5,...")
    ] = None,
    tasks: Annotated[
        Path | None,
        typer.Option("--tasks", help="Signal-task list from `realbench select` (strata, population)"),
    ] = None,
    judge: Annotated[
        str | None, typer.Option("--judge", help="Judge whose verdicts score real episodes")
    ] = None,
    clone_env: Annotated[str, typer.Option("--clone-env", help="env value of the clone side")] = "clone",
    real_env: Annotated[
        str, typer.Option("--real-env", help="env value of the device side (real or clone-on-phone)")
    ] = "real",
    resamples: Annotated[
        int, typer.Option("--resamples", min=0, help="Bootstrap resamples (0 = none)")
    ] = 10_000,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    quantile: Annotated[
        str,
        typer.Option(
            "--quantile",
            help="Fieller's q: auto (t with n − H df below 30 tasks, else z), z, or t (n − 1 df)",
        ),
    ] = "auto",
    borrow_from: Annotated[
        str | None,
        typer.Option(
            "--borrow-from", help="Side whose Se/Sp stand in where the device side has no ground truth"
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Gain retention R = mean device gain / mean clone gain with Fieller, delta and BCa intervals."""
    from analysis.analysis_commands import retention_command

    retention_command(
        table=table,
        clone=clone or [],
        real=real or [],
        base=base,
        trained=trained,
        population=population,
        tasks=tasks,
        judge=judge,
        clone_env=clone_env,
        real_env=real_env,
        resamples=resamples,
        seed=seed,
        quantile=quantile,
        as_json=as_json,
        console=console,
        borrow_from=borrow_from,
    )


@app.command("report")
def report_cmd(
    runs: Annotated[list[Path], typer.Argument(help="Run stores (clone and device runs)")],
    out: Annotated[Path, typer.Option("--out", help="HTML file to write")] = Path("report.html"),
    base: Annotated[str | None, typer.Option("--base", help="Base model (for gains and retention)")] = None,
    trained: Annotated[str | None, typer.Option("--trained", help="Clone-trained model")] = None,
    tasks: Annotated[
        Path | None, typer.Option("--tasks", help="Signal-task list from `realbench select`")
    ] = None,
    judge: Annotated[
        str | None, typer.Option("--judge", help="Judge whose verdicts score real episodes")
    ] = None,
    resamples: Annotated[int, typer.Option("--resamples", min=0)] = 10_000,
    seed: Annotated[int, typer.Option("--seed")] = 0,
) -> None:
    """Write one self-contained HTML report with plots and a side-by-side clone/real replay viewer."""
    from analysis.analysis_commands import report_command

    report_command(
        runs,
        out=out,
        base=base,
        trained=trained,
        tasks=tasks,
        judge=judge,
        resamples=resamples,
        seed=seed,
        console=console,
    )


@app.command("judge")
def judge_cmd(
    rundir: Annotated[Path, typer.Argument(help="Run-store folder (the --out of `realbench run`)")],
    judges: Annotated[list[str], typer.Option("--judge", help="NAME=URL,MODEL (repeat for several judges)")],
    pack: Annotated[
        Path | None, typer.Option("--pack", help="Task pack (default: the one the run recorded)")
    ] = None,
    run_ids: Annotated[
        list[str] | None, typer.Option("--run-id", help="Only these runs of the store")
    ] = None,
    targets: Annotated[
        list[str] | None,
        typer.Option("--target", help="Only episodes on these targets (clone, clone-on-phone, real)"),
    ] = None,
    images: Annotated[int, typer.Option("--images", min=1, help="Screenshots shown to the judge")] = 3,
    sampling: Annotated[str, typer.Option("--sampling", help="last | uniform")] = "last",
    api_key_env: Annotated[
        str | None,
        typer.Option(
            "--api-key-env",
            help="Environment variable holding the judges' API key (default: REALBENCH_API_KEY or OPENAI_API_KEY if set, else no key)",
        ),
    ] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Episodes judged at once")] = 8,
    cache: Annotated[
        bool, typer.Option("--cache/--no-cache", help="Reuse verdicts cached in RUNDIR/judge_cache")
    ] = True,
    price_in: Annotated[
        float, typer.Option("--price-in", help="Judge cost per million prompt tokens (for the cost columns)")
    ] = 0.0,
    price_out: Annotated[
        float, typer.Option("--price-out", help="Judge cost per million completion tokens")
    ] = 0.0,
    judge_decided: Annotated[
        bool, typer.Option("--judge-decided", help="Also judge episodes the checks decide (judge audits)")
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object instead of the table.")
    ] = False,
) -> None:
    """Judge a run's episodes: deterministic checks first, then each VLM judge; verdicts go into the store."""
    import json

    from realbench.agents.endpoint_check import check_served
    from realbench.judge.judge_run import judge_run, parse_judge_spec

    for spec in judges:  # a wrong URL, key or model name is one line now, not a failed request per episode
        name, url, model = parse_judge_spec(spec)
        check_served(url, model, api_key_env=api_key_env, what=f"judge {name}'s model")
    summary = judge_run(
        rundir,
        judges,
        pack_path=pack,
        run_ids=run_ids,
        targets=targets,
        images=images,
        sampling=sampling,
        api_key_env=api_key_env,
        concurrency=concurrency,
        use_cache=cache,
        price_in_per_mtok=price_in,
        price_out_per_mtok=price_out,
        judge_decided=judge_decided,
    )
    from realbench.judge.judge_report import judge_table, raise_if_no_verdicts

    if as_json:
        print(json.dumps(summary, ensure_ascii=False))
    else:
        console.print(judge_table(summary))
    raise_if_no_verdicts(summary, [parse_judge_spec(j)[0] for j in judges])


@app.command("parse-action")
def parse_action_cmd(
    text: Annotated[str, typer.Argument(help="The model output, as the model wrote it ('-' reads stdin)")],
    fmt: Annotated[str, typer.Option("--format", help="Prompt/action format")] = "qwen-mobile",
    image_size: Annotated[
        str | None, typer.Option("--image-size", help="WxH of the resized image the model saw")
    ] = None,
) -> None:
    """Show the realbench actions (JSON) a model output becomes, or the format error."""
    from realbench.agents.parse_action_cmd import parse_image_size, parse_model_output, render

    result = parse_model_output(fmt, sys.stdin.read() if text == "-" else text, parse_image_size(image_size))
    typer.echo(render(result))
    if not result["ok"]:
        raise typer.Exit(code=1)


@app.command("serve-model")
def serve_model_cmd(
    model: Annotated[
        str | None, typer.Argument(help="Checkpoint folder or hub id (not needed with --check)")
    ] = None,
    name: Annotated[
        str | None,
        typer.Option(
            "--name",
            help="Served model name, what --model refers to (default: the checkpoint folder's name); "
            "with --check: the name that must be served",
        ),
    ] = None,
    host: Annotated[str, typer.Option("--host", help="Address the server listens on")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Port the server listens on")] = 8000,
    tp: Annotated[int, typer.Option("--tp", min=1, help="Tensor-parallel GPUs")] = 1,
    gpus: Annotated[
        str | None, typer.Option("--gpus", help="CUDA_VISIBLE_DEVICES for this server, e.g. 0 or 2,3")
    ] = None,
    max_model_len: Annotated[
        int, typer.Option("--max-model-len", help="Context length in tokens (prompt + reply)")
    ] = 32768,
    max_images: Annotated[
        int | None,
        typer.Option(
            "--max-images",
            help="Images per prompt (default: the format's window: 1 for qwen-mobile, 5 for ui-tars)",
        ),
    ] = None,
    max_pixels: Annotated[
        int | None,
        typer.Option(
            "--max-pixels",
            help="Pixel budget per image (default: the format's: 1003520 for qwen-mobile and json, "
            "12845056 for ui-tars)",
        ),
    ] = None,
    fmt: Annotated[
        str, typer.Option("--format", help="The format clients will use: it sets the image limits")
    ] = "qwen-mobile",
    max_tokens: Annotated[
        int | None, typer.Option("--max-tokens", help="Server-side cap on generated tokens (default: none)")
    ] = None,
    gpu_mem: Annotated[float, typer.Option("--gpu-mem", help="Fraction of GPU memory vLLM may use")] = 0.90,
    tools: Annotated[
        bool, typer.Option("--tools", help="Return <tool_call> replies as structured tool calls")
    ] = False,
    api_key_env: Annotated[
        str | None,
        typer.Option("--api-key-env", help="Environment variable holding the key clients must send"),
    ] = None,
    log_file: Annotated[Path, typer.Option("--log", help="File the vLLM server's output goes to")] = Path(
        "out/vllm.log"
    ),
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds to wait for the server to be ready")
    ] = 900.0,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the vllm command and exit")] = False,
    wait: Annotated[
        float,
        typer.Option(
            "--wait", min=0, help="With --check: keep trying this many seconds while nothing answers"
        ),
    ] = 0.0,
    check: Annotated[
        str | None,
        typer.Option(
            "--check",
            help="Only check the endpoint at this URL (…/v1): it answers, accepts the key of --api-key-env "
            "and, with --name, serves that model",
        ),
    ] = None,
) -> None:
    """Serve a Qwen-VL-class checkpoint with vLLM (OpenAI-compatible), or check an endpoint is up."""
    import shlex

    from realbench.agents.serve import ServeConfig, serve_limits, serve_model, vllm_command
    from realbench.errors import ConfigError

    if check is not None:
        from realbench.agents.endpoint_check import check_served

        models = check_served(check, name, api_key_env=api_key_env, what="--name", wait_s=wait)
        served = f"serves {name}" if name else f"serves {', '.join(models) or '(no models listed)'}"
        console.print(f"[green]up[/] {check}: {served}", soft_wrap=True)
        return
    if model is None:
        raise ConfigError(
            "serve-model needs a MODEL (or --check URL)",
            hint="e.g. realbench serve-model /ckpt/base --name base",
        )
    cfg = ServeConfig(
        model=model,
        served_name=name,
        host=host,
        port=port,
        tensor_parallel=tp,
        gpus=gpus,
        max_model_len=max_model_len,
        **serve_limits(fmt, max_images=max_images, max_pixels=max_pixels),
        max_tokens=max_tokens,
        gpu_memory_utilization=gpu_mem,
        tools=tools,
        api_key_env=api_key_env,
    )
    if dry_run:
        prefix = f"CUDA_VISIBLE_DEVICES={gpus} " if gpus else ""
        console.print(prefix + shlex.join(vllm_command(cfg)), highlight=False, soft_wrap=True)
        return

    def ready(info: dict[str, object]) -> None:
        console.print(
            f"[green]ready[/] {info['base_url']} serving {info['models']} (log: {info['log']}); Ctrl-C stops it"
        )

    serve_model(cfg, log_path=log_file, ready_timeout_s=timeout, on_ready=ready)


class DemoPolicies(StrEnum):
    LEARNED = "learned"
    SYNTHETIC = "synthetic"


@app.command("demo")
def demo_cmd(
    out: Annotated[Path, typer.Option("--out", help="Study folder (re-running resumes)")] = Path("out/demo"),
    pack: Annotated[Path | None, typer.Option("--pack", help="Task pack (default: train_ticketing)")] = None,
    clone_repeats: Annotated[
        int, typer.Option("--clone-repeats", min=1, help="Clone runs per task and policy")
    ] = 3,
    real_repeats: Annotated[
        int, typer.Option("--real-repeats", min=1, help="Phone runs per task and policy")
    ] = 2,
    budget_hours: Annotated[
        float, typer.Option("--budget-hours", help="Device-hour budget for the phones")
    ] = 0.12,
    rig: Annotated[
        Path | None, typer.Option("--rig", help="Rig (default: rigs/virtual.yaml, virtual phones)")
    ] = None,
    workers: Annotated[
        int, typer.Option("--workers", min=1, help="Parallel headless clone environments")
    ] = 4,
    phones: Annotated[
        int | None, typer.Option("--phones", min=1, help="Virtual phones to start (virtual rigs)")
    ] = 6,
    policies: Annotated[
        DemoPolicies,
        typer.Option(
            "--policies",
            help="learned: the committed element-policy checkpoints on their training tasks; "
            "synthetic: scripted stand-ins on every task",
        ),
    ] = DemoPolicies.LEARNED,
    progress: Annotated[bool, typer.Option("--progress/--no-progress")] = True,
) -> None:
    """The whole clone-vs-phone study on the embedded defaults: a small element policy before and
    after RL on the clone (committed checkpoints), virtual phones (unless the rig has phones),
    selection, judging, retention and the HTML report."""
    from realbench.study import Study, StudyConfig, learned_policies

    config = StudyConfig(
        out=out,
        clone_repeats=clone_repeats,
        real_repeats=real_repeats,
        budget_hours=budget_hours,
        workers=workers,
        phones=phones,
        progress=progress,
    )
    if pack is not None:
        config.pack = pack
    if rig is not None:
        config.rig = rig
    if policies is DemoPolicies.LEARNED:
        config = learned_policies(config)
    result = Study(config, console=err_console).run()
    data = result.as_dict()
    console.print(f"[bold]study written to {out}[/] — report: {data['report']}")


@app.command("transfer-study")
def transfer_study_cmd(
    out: Annotated[Path, typer.Option("--out", help="Study folder (re-running resumes)")] = Path(
        "out/transfer"
    ),
    base: Annotated[
        str | None, typer.Option("--base", help="Base policy (default: the committed base)")
    ] = None,
    trained: Annotated[
        list[str] | None,
        typer.Option(
            "--trained", help="Trained policy, repeatable (default: committed trained and trained-rand)"
        ),
    ] = None,
    profiles: Annotated[
        str, typer.Option("--profiles", help="Comma-separated drift profiles of the virtual phones")
    ] = "none,mild,relabel,layout,interruptions",
    tasks: Annotated[
        str | None, typer.Option("--tasks", help="Comma-separated task ids (default: all)")
    ] = None,
    clone_repeats: Annotated[int, typer.Option("--clone-repeats", min=1)] = 3,
    real_repeats: Annotated[int, typer.Option("--real-repeats", min=1)] = 2,
    budget_hours: Annotated[float, typer.Option("--budget-hours")] = 0.12,
    phones: Annotated[int | None, typer.Option("--phones", min=1)] = 6,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    progress: Annotated[bool, typer.Option("--progress/--no-progress")] = True,
) -> None:
    """Base vs each trained element policy on the clone and on virtual phones under each drift
    profile; writes retention per profile (table, plot, findings) into the study's report."""
    from realbench.study import StudyConfig
    from realbench.transfer_study import TransferConfig, TransferStudy

    study = StudyConfig(
        clone_repeats=clone_repeats,
        real_repeats=real_repeats,
        budget_hours=budget_hours,
        phones=phones,
        seed=seed,
        progress=progress,
        tasks=[t for t in tasks.split(",") if t] if tasks else None,
    )
    config = TransferConfig(out=out, profiles=[p for p in profiles.split(",") if p], study=study)
    if base is not None:
        config.base = base
    if trained:
        config.trained = list(trained)
    report = TransferStudy(config).run()
    console.print(f"[bold]transfer study written to {out}[/] — report: {report}")


@app.command("console")
def console_cmd(
    rig: Annotated[str | None, typer.Option("--rig", help="Rig file or name: its phones")] = None,
    store: Annotated[
        list[Path] | None, typer.Option("--store", help="Run store to show and label (repeatable)")
    ] = None,
    host: Annotated[
        str, typer.Option("--host", help="Address to bind; not loopback needs --token-env")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port")] = 8700,
    token_env: Annotated[
        str | None, typer.Option("--token-env", help="Environment variable holding the access token")
    ] = None,
    data: Annotated[
        Path, typer.Option("--data", help="Folder for captures, recordings and the confirmation log")
    ] = Path("console-data"),
    pack: Annotated[
        list[Path] | None, typer.Option("--pack", help="Packs whose stop controls are armed (default: all)")
    ] = None,
    label_plan: Annotated[
        list[Path] | None, typer.Option("--label-plan", help="Labelling plan served first")
    ] = None,
    scrcpy: Annotated[
        bool, typer.Option("--scrcpy/--no-scrcpy", help="Live view and input over scrcpy (else screenshots)")
    ] = True,
) -> None:
    """The lab console: fleet, live phone view with control and inspector, capture, runs, labelling."""
    from realbench.console.command import console_command

    console_command(
        rig=rig,
        stores=list(store or []),
        host=host,
        port=port,
        token_env=token_env,
        data_dir=data,
        packs=pack,
        plans=label_plan,
        scrcpy=scrcpy,
    )


@app.command("capture")
def capture_cmd(
    rig: Annotated[str, typer.Option("--rig", help="Rig file or name")],
    serial: Annotated[str, typer.Option("--serial", help="Phone serial")],
    out: Annotated[Path, typer.Option("--out", help="Capture folder")],
    label: Annotated[str, typer.Option("--label", help="The clone screen this corresponds to")] = "",
) -> None:
    """Capture one phone screen: screenshot, hierarchy, foreground activity, app version, profile, time."""
    from realbench.console.command import capture_command

    path = capture_command(rig=rig, serial=serial, label=label, out=out)
    console.print(str(path))


@app.command("fidelity")
def fidelity_cmd(
    pack: Annotated[Path, typer.Option("--pack", help="Task pack of the clone the captures show")],
    captures: Annotated[Path, typer.Option("--captures", help="Folder of labelled captures")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the scores as JSON")] = False,
    out: Annotated[Path | None, typer.Option("--out", help="Write the side-by-side HTML report")] = None,
) -> None:
    """Score labelled captures of real screens against the clone's rendering of the same screens."""
    import clones.registry  # noqa: F401  (registers the built-in clones)
    from analysis.fidelity.captures import BadCapture, load_captures
    from analysis.fidelity.measure import fidelity_run, result_json
    from devices.clone_render import CloneScreenRenderer
    from realbench.taskpack import load_pack

    task_pack = load_pack(pack)
    bad: list[BadCapture] = []
    loaded = load_captures(captures, bad)  # before the browser starts: a bad folder fails fast
    with CloneScreenRenderer(task_pack) as renderer:
        result = fidelity_run(loaded, renderer, pack=task_pack.app, clone=task_pack.clone, out=out, bad=bad)
    if as_json:
        typer.echo(result_json(result))
    else:
        for s in result.screens:
            console.print(f"{s.score:.3f}  {s.label}" + ("  [virtual phone]" if s.virtual else ""))
        console.print(f"[bold]fidelity {result.score:.3f}[/]" + (f" — report: {out}" if out else ""))
    for u in result.unscored:  # named, the others scored: the run still says it was not clean
        err_console.print(f"[yellow]not scored[/] {u.capture}: {u.reason}", highlight=False, soft_wrap=True)
    if result.unscored:
        raise typer.Exit(code=1)


def run() -> None:
    """Entry point that maps realbench errors to clean messages (used by `python -m realbench`)."""
    try:
        app()
    except RealbenchError as exc:
        # outside the typer app a typer.Exit is not caught any more: exit with its code directly
        sys.exit(fail(exc).exit_code)


if __name__ == "__main__":
    run()
