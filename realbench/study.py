"""The whole clone-vs-phone study, end to end (what `realbench demo` and `make demo` run).

Stages, each writing under the study folder and each resumable (a rerun skips finished work):

1. clone   — base and trained policies on every task of the pack on the headless clone, m runs each
             (run store `clone/`);
2. select  — strata from those runs, the reproducibility screen (recorded traces replayed on a fresh
             clone), device-budget allocation, stable-failure controls (`signal.json`);
3. real    — both policies on the selected tasks on the phones of a rig, interleaved on the same
             phones (run store `real/`); with no phone attached, virtual phones showing drifted clones;
4. judge   — deterministic checks and the judges over the real-app episodes;
5. analyse — gains, retention with Fieller/delta/BCa intervals (`retention.json`);
6. report  — one self-contained HTML report with the replay viewer (`report.html`).

On the embedded defaults (`realbench demo`) the policies are the committed element-policy
checkpoints (a small network before and after RL on the clone, `learned_policies`) on the tasks they
were trained on, and the phones are virtual; both are labelled so in every output. The synthetic
policies (`synthetic:base`, `synthetic:trained`) remain the StudyConfig's own defaults, for tests.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class StudyConfig:
    out: Path = Path("out/demo")
    pack: Path = ROOT / "taskpacks" / "train_ticketing"
    base: str = "synthetic:base"
    trained: str = "synthetic:trained"
    clone_repeats: int = 3
    real_repeats: int = 2
    # 27 tasks on the phones: with fewer, the clone gain of the pack-weighted sample (R_pop) is too
    # noisy for its interval to exclude 0 and the headline is not estimable (docs/benchmarks.md).
    budget_hours: float = 0.12
    # Device cost per episode for the allocation; a virtual-phone episode takes about 4 s here.
    episode_seconds: float = 4.0
    controls: int = 2
    replay_k: int = 2
    replay_traces: int = 1
    # Headless clone pages for the reproducibility screen. On two cores two pages left about a third
    # of the CPU idle during the screen (a replay costs about as much CPU as a clone episode, ~0.9
    # CPU-seconds with Chromium's share, docs/benchmarks.md); four keep it busy like the clone runs.
    replay_workers: int = 4
    rig: Path = ROOT / "rigs" / "virtual.yaml"
    # Virtual phones to start when the rig has a virtual section (None: the rig's own count).
    # Episodes on virtual phones wait on the device protocol for part of each step: four phones left
    # about a quarter of two cores idle in the phone stage (~4 CPU-seconds per episode against ~10 s
    # of a phone's time, docs/benchmarks.md), six fill it. The outcomes do not depend on the count.
    phones: int | None = 6
    target: str = "real"
    # Headless clone pages in parallel; clone episodes also wait more than they compute.
    workers: int = 4
    scale: float = 1.0  # headless clone screenshots at 412×915: synthetic policies do not read pixels
    judges: list[str] = field(default_factory=list)
    tasks: list[str] | None = None  # a subset of the pack (tests, quick looks); None = every task
    # recorded agent name -> how to run it, for policies whose name is not their spec (a checkpoint
    # runs as policy:PATH and is recorded as policy:<name>@<hash>; realbench.policy_refs)
    agents: dict[str, str] = field(default_factory=dict)
    seed: int = 0
    progress: bool = True


@dataclass
class StageTiming:
    name: str
    seconds: float
    note: str = ""


@dataclass
class StudyResult:
    out: Path
    stages: list[StageTiming]
    retention: dict[str, Any] | None
    report: Path | None
    summaries: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {
            "out": str(self.out),
            "stages": [asdict(s) for s in self.stages],
            "retention": self.retention,
            "report": str(self.report) if self.report else None,
            "summaries": self.summaries,
        }


class Study:
    def __init__(self, config: StudyConfig, console: Console | None = None) -> None:
        self.cfg = config
        self.console = console or Console(stderr=True)
        from realbench.folder_checks import require_output_folder

        self.out = Path(config.out)
        require_output_folder(self.out)  # a file where the study folder belongs: one line, exit 2
        self.out.mkdir(parents=True, exist_ok=True)
        self.stages: list[StageTiming] = []
        self.summaries: dict[str, Any] = {}
        self.retention: dict[str, Any] | None = None
        self.report_path: Path | None = None

    @property
    def clone_store(self) -> Path:
        return self.out / "clone"

    @property
    def real_store(self) -> Path:
        return self.out / "real"

    @property
    def signal_path(self) -> Path:
        return self.out / "signal.json"

    def _stage(self, name: str, fn: Callable[[], str | None]) -> None:
        self.console.rule(f"[bold]{name}")
        t0 = time.perf_counter()
        note = fn() or ""
        seconds = time.perf_counter() - t0
        self.stages.append(StageTiming(name, round(seconds, 1), note))
        self.console.print(f"[green]✓[/] {name} ({seconds:.0f} s){': ' + note if note else ''}")

    def _rig(self) -> Path:
        """The rig to run on: the configured one, or a copy of it with `phones` virtual phones."""
        from devices.rig import load_rig
        from realbench.safe_yaml import load_yaml_text, read_yaml_file

        rig = load_rig(self.cfg.rig)
        if self.cfg.phones is None or rig.virtual is None or rig.virtual.count == self.cfg.phones:
            return self.cfg.rig
        raw = load_yaml_text(read_yaml_file(Path(self.cfg.rig), what="rig"))
        raw["virtual"]["count"] = self.cfg.phones
        raw["description"] = f"{raw.get('description', '')} ({self.cfg.phones} phones for this study)".strip()
        path = self.out / "rig.yaml"
        path.write_text(yaml.safe_dump(raw, allow_unicode=True, sort_keys=False), encoding="utf-8")
        return path

    def _run(
        self, *, out: Path, target: str, agent: str, repeats: int, tasks: str | None = None
    ) -> dict[str, Any]:
        from devices.pack_run import run_pack
        from realbench.run_config import RunConfig

        summary = run_pack(
            RunConfig(
                pack=self.cfg.pack,
                out=out,
                target=target,
                agent=self.cfg.agents.get(agent, agent),
                repeats=repeats,
                seed=self.cfg.seed,
                tasks=tasks,
                workers=self.cfg.workers,
                rig=self._rig() if target != "clone" else None,
                scale=self.cfg.scale,
                progress=self.cfg.progress,
            )
        )
        self.summaries[f"{summary['run_id']}"] = summary
        return summary

    # --- stages -------------------------------------------------------------------------------

    def clone_runs(self) -> str:
        notes = []
        for agent in (self.cfg.base, self.cfg.trained):
            s = self._run(
                out=self.clone_store,
                target="clone",
                agent=agent,
                repeats=self.cfg.clone_repeats,
                tasks=",".join(self.cfg.tasks) if self.cfg.tasks else None,
            )
            notes.append(f"{agent} {s['successes']}/{s['episodes']}")
        return ", ".join(notes)

    def select(self) -> str:
        from analysis.analysis_commands import select_command
        from devices.clone_replayer import CloneReplayer
        from devices.phone_filter import PhoneFilter, phone_filter

        if self.signal_path.exists():
            # A resumed study keeps the design it started with: selecting again could pick other
            # tasks (the replay screen is not certain to repeat), and the phone runs already made
            # belong to the first selection. Delete signal.json to select afresh.
            kept = json.loads(self.signal_path.read_text(encoding="utf-8"))
            return f"kept the earlier selection ({len(kept.get('tasks', []))} tasks, {self.signal_path.name})"

        # A real run skips tasks not allowed on a real account: leave them out of the sample up
        # front, or a stratum (even the signal one) ends up thinner on the phones than planned.
        allowed = (
            phone_filter(self.cfg.pack, None, [])
            if self.cfg.target == "real"
            else PhoneFilter({}, f"none: {self.cfg.target} runs start every task")
        )
        with CloneReplayer(self.cfg.pack, scale=self.cfg.scale, workers=self.cfg.replay_workers) as replayer:
            result = select_command(
                [self.clone_store],
                base=self.cfg.base,
                trained=self.cfg.trained,
                budget_hours=self.cfg.budget_hours,
                runs=self.cfg.real_repeats,
                episode_seconds=self.cfg.episode_seconds,
                replay_k=self.cfg.replay_k,
                replay_traces=self.cfg.replay_traces,
                replayer=replayer,
                controls=self.cfg.controls,
                seed=self.cfg.seed,
                out=self.signal_path,
                console=self.console,
                not_runnable=allowed.excluded,
                phone_filter=allowed.source,
            )
        left_out = f" ({len(result.excluded)} not runnable on the phones left out)" if result.excluded else ""
        return f"{len(result.selected)} tasks selected for the phones{left_out}"

    def real_runs(self) -> str:
        notes = []
        for agent in (self.cfg.base, self.cfg.trained):
            s = self._run(
                out=self.real_store,
                target=self.cfg.target,
                agent=agent,
                repeats=self.cfg.real_repeats,
                tasks="@" + str(self.signal_path),
            )
            notes.append(
                f"{agent}: {s['episodes']} episodes, {s['aborted']} aborted, abort rate {s['abort_rate']:.0%}"
            )
        return "; ".join(notes)

    def judge(self) -> str:
        """Deterministic checks (and VLM judges when endpoints are configured) over the phone runs;
        with none configured, a labelled synthetic judge of known error rates judges both sides, so
        the audit and the judge-based estimates (R_JJ) have something to measure."""
        from realbench.judge.judge_run import judge_run
        from realbench.judge.synthetic import SyntheticJudge

        summary = judge_run(self.real_store, self.cfg.judges, pack_path=self.cfg.pack)
        self.summaries["judge"] = summary
        notes = [f"checks decided {summary['decided_by_checks']} of {summary['episodes']} phone episodes"]
        if not self.cfg.judges:
            synthetic = SyntheticJudge(seed=self.cfg.seed)
            for name, store in (("clone", self.clone_store), ("real", self.real_store)):
                counts = synthetic.judge_store(store)
                self.summaries[f"{synthetic.name}@{name}"] = counts
            notes.append(f"{synthetic.name} (Se={synthetic.sensitivity}, Sp={synthetic.specificity})")
        return "; ".join(notes)

    def analyse(self) -> str:
        from analysis.analysis_commands import retention_command
        from realbench.errors import AnalysisError

        try:
            result = retention_command(
                clone=[self.clone_store],
                real=[self.real_store],
                base=self.cfg.base,
                trained=self.cfg.trained,
                tasks=self.signal_path,
                real_env=self.cfg.target,
                seed=self.cfg.seed,
                console=self.console,
            )
        except AnalysisError as exc:
            # Too little paired data is a finding of the study, not a crash: the report says so.
            self.retention = {"retention": None, "not_computed": str(exc)}
            return f"retention not computed: {exc.message}"
        data = result.to_dict()
        (self.out / "retention.json").write_text(
            json.dumps(data, ensure_ascii=False, indent=2, default=str), encoding="utf-8"
        )
        self.retention = data
        r = data.get("retention")
        label = {"signal": "R_signal", "sample": "R_sample", "population": "R_pop"}.get(
            data.get("estimand", ""), "R"
        )
        return (
            f"{label} = {r:.2f}" if isinstance(r, float) else f"{label} not estimable: {data.get('reason')}"
        )

    def report(self) -> str:
        from analysis.analysis_commands import report_command

        self.report_path = report_command(
            [self.clone_store, self.real_store],
            out=self.out / "report.html",
            base=self.cfg.base,
            trained=self.cfg.trained,
            tasks=self.signal_path,
            seed=self.cfg.seed,
            console=self.console,
        )
        return str(self.report_path)

    def run(self) -> StudyResult:
        self._stage("1 · clone runs (base and trained on the headless clone)", self.clone_runs)
        self._stage("2 · signal-task selection", self.select)
        self._stage(f"3 · {self.cfg.target} runs on the rig's phones", self.real_runs)
        self._stage("4 · checks and judges", self.judge)
        self._stage("5 · gain retention", self.analyse)
        self._stage("6 · report", self.report)
        result = StudyResult(self.out, self.stages, self.retention, self.report_path, self.summaries)
        (self.out / "study.json").write_text(
            json.dumps(result.as_dict(), ensure_ascii=False, indent=2, default=str), encoding="utf-8"
        )
        return result


def learned_policies(config: StudyConfig) -> StudyConfig:
    """`config` with the committed element-policy checkpoints as its base and trained policies, on
    the training tasks of the trained one (the policy has never seen the pack's other tasks)."""
    from dataclasses import replace

    from realbench.errors import ConfigError
    from realbench.policy_refs import committed
    from realbench.taskpack import load_pack

    base, trained = committed("base"), committed("trained")
    pack = load_pack(config.pack)
    if trained.card is None or trained.card.pack != pack.clone:
        raise ConfigError(
            f"the committed policies were trained on {trained.card.pack if trained.card else '?'!r}, "
            f"not on {pack.clone!r}",
            hint="run the scripted stand-ins there with --policies synthetic, or train a policy on it "
            "(`realbench train`, docs/rl.md)",
        )
    return replace(
        config,
        base=base.agent,
        trained=trained.agent,
        agents={**config.agents, base.agent: base.spec, trained.agent: trained.spec},
        tasks=list(trained.card.tasks),
    )
