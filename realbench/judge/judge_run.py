"""`realbench judge RUNDIR --judge NAME=URL,MODEL …`: judge a run store's episodes, write verdicts.

For every scored episode: deterministic checks first (a `checks` verdict, no model call); where
they cannot decide, every named judge gives its verdict. Verdicts go into the store (replacing an
earlier verdict of the same judge, so re-judging is idempotent) and judge replies are cached in
``RUNDIR/judge_cache`` by trajectory content. A summary with tokens and cost per judge is written
to ``RUNDIR/judge_summary.json``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from realbench.agents.client import ChatEndpoint
from realbench.errors import ConfigError, ModelError, StoreError
from realbench.judge import ajudge_trajectory
from realbench.judge.cache import JudgeCache
from realbench.judge.vlm import ImageSampling, VLMJudge, VLMJudgeConfig, is_endpoint_failure
from realbench.outcome import Verdict
from realbench.taskpack import TaskPack, load_pack
from realbench.templating import render_value
from realbench.trajectory import Trajectory

log = logging.getLogger(__name__)

_SPEC = re.compile(r"^(?P<name>[A-Za-z0-9._:-]+)=(?P<url>[^,]+),(?P<model>.+)$")
# verifier arguments that, when a task declares them, hold the expected answer
EXPECTED_KEYS = ("expected", "expected_answer", "answer")


def parse_judge_spec(spec: str) -> tuple[str, str, str]:
    m = _SPEC.match(spec.strip())
    if not m:
        raise ConfigError(
            f"bad --judge value {spec!r}",
            hint="write NAME=URL,MODEL, e.g. qwen72=http://localhost:8001/v1,Qwen/Qwen2.5-VL-72B-Instruct",
        )
    return m.group("name"), m.group("url"), m.group("model")


def expected_answer_of(pack: TaskPack, task_id: str, params: dict[str, Any]) -> Any:
    """The expected answer when the task's verifier arguments state it (rendered with the params)."""
    task = pack.task(task_id)
    try:
        args = render_value(task.clone.verifier.args, params)
    except ConfigError:
        return None
    for key in EXPECTED_KEYS:
        if isinstance(args, dict) and args.get(key) not in (None, ""):
            return args[key]
    return None


@dataclass
class JudgeSummary:
    episodes: int = 0
    decided_by_checks: int = 0
    skipped: int = 0
    judged: dict[str, dict[str, float]] = field(default_factory=dict)
    endpoint_failures: dict[str, int] = field(default_factory=dict)

    def add(self, verdict: Verdict) -> None:
        row = self.judged.setdefault(
            verdict.name, {"verdicts": 0, "success": 0, "abstained": 0, "tokens": 0, "cost_usd": 0.0}
        )
        row["verdicts"] += 1
        row["success"] += int(verdict.success and not verdict.abstained)
        row["abstained"] += int(verdict.abstained)
        row["tokens"] += verdict.tokens or 0
        row["cost_usd"] += verdict.cost_usd or 0.0


def _pack_for(store: Any, pack_path: Path | None) -> TaskPack:
    if pack_path is not None:
        return load_pack(pack_path)
    paths = {r["config"].get("pack") for r in store.runs() if r.get("config")}
    paths.discard(None)
    if len(paths) != 1:
        raise ConfigError(
            "cannot tell which task pack the store's episodes come from",
            hint="pass --pack taskpacks/<app>",
        )
    return load_pack(paths.pop())


def judge_run(
    rundir: Path,
    judge_specs: list[str],
    *,
    pack_path: Path | None = None,
    run_ids: list[str] | None = None,
    targets: list[str] | None = None,
    images: int = 3,
    sampling: str = "last",
    api_key_env: str | None = None,
    concurrency: int = 8,
    use_cache: bool = True,
    timeout_s: float = 120.0,
    price_in_per_mtok: float = 0.0,
    price_out_per_mtok: float = 0.0,
    judge_decided: bool = False,
) -> dict[str, Any]:
    from realbench.store import RunStore

    if not (Path(rundir) / "index.sqlite").exists():
        raise StoreError(f"{rundir} is not a run store", hint="pass the --out folder of a `realbench run`")
    store = RunStore(rundir, create=False, writer="realbench judge")
    try:
        pack = _pack_for(store, pack_path)
        cache = JudgeCache(Path(rundir) / "judge_cache") if use_cache else None
        judges = []
        names = set()
        for spec in judge_specs:
            name, url, model = parse_judge_spec(spec)
            if name in names:
                raise ConfigError(f"two judges are named {name!r}", hint="give every --judge its own NAME")
            names.add(name)
            endpoint = ChatEndpoint(base_url=url, model=model, api_key_env=api_key_env, timeout_s=timeout_s)
            config = VLMJudgeConfig(
                name=name,
                endpoint=endpoint,
                images=images,
                sampling=ImageSampling(sampling),
                price_in_per_mtok=price_in_per_mtok,
                price_out_per_mtok=price_out_per_mtok,
            )
            judges.append(VLMJudge(config, cache=cache))
        try:
            summary = asyncio.run(
                _judge_all(store, pack, judges, run_ids, targets, concurrency, judge_decided)
            )
        finally:
            for j in judges:
                j.close()
    finally:
        store.close()
    out = {
        "episodes": summary.episodes,
        "decided_by_checks": summary.decided_by_checks,
        "skipped_unscored": summary.skipped,
        "judges": summary.judged,
        "cache": {"hits": cache.hits, "misses": cache.misses} if cache else None,
    }
    out["endpoint_failures"] = summary.endpoint_failures
    (Path(rundir) / "judge_summary.json").write_text(json.dumps(out, indent=1), encoding="utf-8")
    dead = sorted(
        name
        for name, failed in summary.endpoint_failures.items()
        if failed and not summary.judged.get(name, {}).get("verdicts")
    )
    if dead:
        raise ModelError(
            f"every request to judge(s) {', '.join(dead)} failed at the endpoint; no verdict of theirs was recorded",
            hint="check the URL, that the server is up and the API key (--api-key-env); rerunning retries them",
        )
    for name, failed in summary.endpoint_failures.items():
        log.warning("judge %s: %d request(s) failed at the endpoint and were not recorded", name, failed)
    return out


async def _judge_all(
    store: Any,
    pack: TaskPack,
    judges: list[VLMJudge],
    run_ids: list[str] | None,
    targets: list[str] | None,
    concurrency: int,
    judge_decided: bool = False,
) -> JudgeSummary:
    frame = store.episodes_frame(run_ids)
    if targets:
        frame = frame[frame["env"].isin(targets)]
    summary = JudgeSummary()
    gate = asyncio.Semaphore(max(1, concurrency))
    known = {t.id for t in pack.tasks}

    async def one(episode_id: str, task_id: str, scored: bool) -> None:
        if not scored or task_id not in known:
            summary.skipped += 1
            return
        async with gate:
            traj = await asyncio.to_thread(Trajectory.from_store, store, episode_id)
            task = pack.task(task_id)
            expected = expected_answer_of(pack, task_id, traj.params)
            verdicts = await ajudge_trajectory(
                task, traj, judges, expected_answer=expected, judge_decided=judge_decided
            )
        summary.episodes += 1
        for v in verdicts:
            if is_endpoint_failure(v):
                # not a verdict: kept out of the store so an earlier real one stays, and retried next time
                summary.endpoint_failures[v.name] = summary.endpoint_failures.get(v.name, 0) + 1
                continue
            if v.source.value == "checks":
                summary.decided_by_checks += 1
            summary.add(v)
            store.add_verdict(episode_id, v)

    await asyncio.gather(
        *(one(row.episode_id, row.task, bool(row.scored)) for row in frame.itertuples(index=False))
    )
    return summary
