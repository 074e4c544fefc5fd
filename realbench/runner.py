"""Runs the planned episodes of a pack on a set of targets, into a run store, resumably.

One worker thread per target (a headless clone page or a leased phone). Episodes already in the
store are skipped, so re-running the same command after a crash finishes the run without
redoing or losing an episode. An `env_invalid` attempt is an unscored abort: the episode is
queued again (on another target when there is one) up to `max_attempts` times.

Ctrl-C stops the run: workers take no new episode, and an episode that the stop cut short (its
target closed under it) is recorded as `interrupted`, which is neither an agent failure nor a
device's abort. It takes nothing from the episode's attempt budget nor from the phone's abort
rate, and a plain rerun runs it again.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Protocol

from tqdm import tqdm

from realbench.agent import Agent
from realbench.device import Target
from realbench.episode import EpisodeResult, run_episode
from realbench.errors import ConfigError, RealbenchError
from realbench.outcome import Outcome
from realbench.store import EpisodeKey, RunStore
from realbench.taskpack import Task, TaskInstance, TaskPack

log = logging.getLogger(__name__)

DEFAULT_MAX_ATTEMPTS = 3


def plan_episodes(
    pack: TaskPack, *, task_ids: Iterable[str] | None = None, repeats: int = 1, seed: int = 0
) -> list[EpisodeKey]:
    """Every (task, seed, repeat) of a run. Repeat r uses seed `seed + r`, the same for every model,
    so base and trained runs see the same sampled parameters."""
    if repeats < 1:
        raise ConfigError("--repeats must be at least 1")
    tasks = [pack.task(t) for t in task_ids] if task_ids else pack.tasks
    return [EpisodeKey(task.id, seed + r, r) for task in tasks for r in range(repeats)]


def default_run_id(agent: str, target: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", f"{agent}@{target}")


def task_instance(target: Target, task: Task, seed: int) -> TaskInstance:
    """The target's instance of a task: a phone target draws real-side parameters from its
    account's fixture; any other samples them from the task's own parameters."""
    make = getattr(target, "instantiate", None)
    if callable(make):
        instance: TaskInstance = make(task, seed)
        return instance
    return task.instantiate(seed, task_today(target, task))


def task_today(target: Target, task: Task) -> date:
    """The date relative dates resolve against: the target's clock (a phone's today, a clone's virtual clock)."""
    today = getattr(target, "today", None)
    if callable(today):
        value = today(task)
        if isinstance(value, date):
            return value
    return task.clone.setup.clock.date()


class EpisodeExecutor(Protocol):
    """Runs one attempt somewhere and returns its result (local thread, Ray task…)."""

    def __call__(self, target: Target, key: EpisodeKey) -> EpisodeResult: ...


@dataclass
class _Item:
    key: EpisodeKey
    attempt: int
    avoid: set[str] = field(default_factory=set)
    last_attempt: int = DEFAULT_MAX_ATTEMPTS - 1  # the attempt number after which it is given up


def _counted(outcomes: list[Outcome]) -> list[Outcome]:
    """The attempts that count against an episode's budget (an interruption does not)."""
    return [o for o in outcomes if o is not Outcome.INTERRUPTED]


@dataclass
class RunSummary:
    run_id: str
    data: dict[str, Any]

    def write(self, path: Path) -> None:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self.data, ensure_ascii=False, indent=2), encoding="utf-8")
        os.replace(tmp, path)


def summarize(store: RunStore, run_id: str, *, max_attempts: int | None = None) -> RunSummary:
    """The run's summary, computed from the store (so it covers resumed runs). `max_attempts`:
    the run's own (recorded with it) unless given."""
    runs = {r["run_id"]: r for r in store.runs()}
    meta = runs.get(run_id, {})
    if max_attempts is None:
        max_attempts = int((meta.get("config") or {}).get("max_attempts") or DEFAULT_MAX_ATTEMPTS)
    attempts = store.attempts(run_id, include_damaged=False)
    frame = store.episodes_frame([run_id])
    outcomes: Counter[str] = Counter(str(o) for outs in attempts.values() for o in outs)
    tasks: dict[str, dict[str, int]] = {}
    scored = successes = aborted = interrupted = 0
    decided = store.decisions(run_id)
    undecided = 0
    given_up_keys: set[EpisodeKey] = set()
    for key, outs in sorted(attempts.items(), key=lambda kv: (kv[0].task, kv[0].seed, kv[0].repeat)):
        entry = tasks.setdefault(
            key.task, {"episodes": 0, "successes": 0, "aborted": 0, "undecided": 0, "interrupted": 0}
        )
        final = outs[-1]
        if final is Outcome.INTERRUPTED or (not final.scored and len(_counted(outs)) < max_attempts):
            # stopped before its budget ran out: a plain rerun resumes it
            interrupted += 1
            entry["interrupted"] += 1
        elif final.scored:
            scored += 1
            entry["episodes"] += 1
            verdict = decided.get(key)
            if verdict is None:
                undecided += 1
                entry["undecided"] += 1
            elif verdict.success:
                successes += 1
                entry["successes"] += 1
        else:
            aborted += 1
            entry["aborted"] += 1
            given_up_keys.add(key)
    total_attempts = sum(outcomes.values())
    # interruptions are the operator's, not the device's: out of every abort rate
    counted_attempts = total_attempts - outcomes.get(str(Outcome.INTERRUPTED), 0)
    devices: dict[str, dict[str, Any]] = {}
    if not frame.empty:
        counted = frame[frame["outcome"] != str(Outcome.INTERRUPTED)]
        for serial, group in counted.groupby(counted["device_serial"].fillna("?")):
            invalid = int((group["outcome"] == str(Outcome.ENV_INVALID)).sum())
            devices[str(serial)] = {
                "kind": str(group["device_kind"].iloc[0]),
                "attempts": int(len(group)),
                "env_invalid": invalid,
                "flake_rate": invalid / len(group),
            }
    given_up = _given_up_reasons(frame, given_up_keys)
    data = {
        "run_id": run_id,
        "agent": meta.get("agent"),
        "target": meta.get("target"),
        "pack": meta.get("pack"),
        "episodes": scored,
        "successes": successes,
        "success_rate": successes / (scored - undecided) if scored > undecided else None,
        "undecided": undecided,
        "aborted": aborted,
        # episodes whose every attempt failed on the environment; `run --retry-given-up` retries them
        "given_up": aborted,
        "given_up_reasons": given_up,
        # stopped by Ctrl-C (or before their reruns): a plain rerun of the same command resumes them
        "interrupted": interrupted,
        "attempts": total_attempts,
        "damaged": len(set(store.damaged()) & store.episode_ids(run_id)),
        "abort_rate": outcomes.get(str(Outcome.ENV_INVALID), 0) / counted_attempts
        if counted_attempts
        else 0.0,
        "outcomes": dict(sorted(outcomes.items())),
        "tasks": tasks,
        "devices": devices,
        "synthetic": bool(meta.get("agent", "") and str(meta.get("agent")).startswith("synthetic:")),
        "max_attempts": max_attempts,
        # tasks a real run did not start, with the reason (not allowed on a real account)
        "skipped": list((meta.get("config") or {}).get("skipped") or []),
    }
    return RunSummary(run_id, data)


REASON_CHARS = 120


def raise_if_unusable(data: dict[str, Any]) -> None:
    """A run that scored nothing, or stopped because every phone was set aside, is a failure of
    the command (non-zero exit), not a result."""
    from realbench.errors import RunFailedError

    reasons = data.get("given_up_reasons") or {}
    why = "; ".join(f"{n}× {r}" for r, n in list(reasons.items())[:3])
    if data.get("quarantined_all"):
        raise RunFailedError(
            f"run {data['run_id']}: every phone was quarantined; {data.get('not_run')} episode(s) were not run"
            + (f" (last failures: {why})" if why else ""),
            hint="see `realbench devices --rig …`, fix the phones, then rerun the same command (it resumes)",
        )
    if not data.get("episodes") and data.get("aborted"):
        raise RunFailedError(
            f"run {data['run_id']}: every episode aborted ({data['aborted']} given up): {why or 'env_invalid'}",
            hint="fix the cause above, then rerun the same command with --retry-given-up",
        )


def _given_up_reasons(frame: Any, keys: set[EpisodeKey]) -> dict[str, int]:
    """The last attempt's error of each given-up episode, counted (most common first)."""
    if not keys or frame.empty:
        return {}
    reasons: Counter[str] = Counter()
    last = frame.sort_values("attempt").groupby(["task", "seed", "repeat"]).tail(1)
    for row in last.itertuples(index=False):
        if EpisodeKey(row.task, int(row.seed), int(row.repeat)) in keys:
            error = getattr(row, "error", None)
            text = str(error).splitlines()[0] if isinstance(error, str) and error else ""
            reasons[text[:REASON_CHARS] or str(row.outcome)] += 1
    return dict(reasons.most_common())


def pending_items(
    store: RunStore, run_id: str, keys: list[EpisodeKey], *, max_attempts: int, retry_given_up: bool
) -> list[_Item]:
    """The planned episodes still to run, each with the attempt numbers it has left."""
    done = store.attempts(run_id)
    numbers = store.attempt_numbers(run_id)
    items = []
    for key in keys:
        outs = _counted(done.get(key, []))
        if any(o.scored for o in outs):
            continue
        # after `store repair` re-queued a damaged attempt the numbers may have a gap
        first = max(numbers.get(key, [-1])) + 1
        if len(outs) >= max_attempts:
            if not retry_given_up:
                continue
            # a given-up episode gets a fresh budget of max_attempts attempts
            items.append(_Item(key, attempt=first, last_attempt=first + max_attempts - 1))
            continue
        items.append(_Item(key, attempt=first, last_attempt=first + max_attempts - len(outs) - 1))
    return items


def run_summary(store: RunStore, run_id: str, *, max_attempts: int, not_run: int = 0) -> RunSummary:
    """The summary a run ends with; `not_run`: episodes left because every target was quarantined."""
    summary = summarize(store, run_id, max_attempts=max_attempts)
    summary.data["not_run"] = not_run
    summary.data["quarantined_all"] = not_run > 0
    return summary


# How long a worker whose episode failed waits for a stop that a Ctrl-C may have set off (see
# LocalRunner._stopping); a device failure with no stop behind it is recorded this much later.
STOP_GRACE_S = 0.5


class LocalRunner:
    """Executes planned episodes with one worker thread per target."""

    def __init__(
        self,
        store: RunStore,
        run_id: str,
        pack: TaskPack,
        targets: list[Target],
        agent_factory: Callable[[], Agent],
        *,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        progress: bool = True,
        execute: EpisodeExecutor | None = None,
        retry_given_up: bool = False,
        eligible: Callable[[Target, EpisodeKey], bool] | None = None,
    ) -> None:
        """`eligible(target, key)`: whether that target may run that episode (e.g. only the tasks
        certified for a phone); by default every target may run every episode."""
        if not targets:
            raise ConfigError(
                "no targets to run on", hint="check the rig (realbench devices --rig …) or --workers"
            )
        self.store = store
        self.run_id = run_id
        self.pack = pack
        self.targets = targets
        self.agent_factory = agent_factory
        self.max_attempts = max_attempts
        self.progress = progress
        self.execute = execute or self._execute_here
        self.retry_given_up = retry_given_up
        self.not_run = 0
        self.eligible = eligible or (lambda _target, _key: True)
        self._agents: dict[int, Agent] = {}
        # set on Ctrl-C: workers take no new episode and record the cut-short ones as interrupted
        self.stop = threading.Event()
        # Set by each worker as it ends. Not Thread.is_alive: on 3.11 a join that Ctrl-C cuts short
        # can mark a still-running thread stopped (CPython gh-90882), and the store would then be
        # closed under a worker that is still recording its episode.
        self._finished: list[threading.Event] = []

    def _execute_here(self, target: Target, key: EpisodeKey) -> EpisodeResult:
        agent = self._agents.setdefault(id(target), self.agent_factory())
        task = self.pack.task(key.task)
        instance = task_instance(target, task, key.seed)
        return run_episode(instance, target, agent)

    def pending(self, keys: list[EpisodeKey]) -> list[_Item]:
        return pending_items(
            self.store, self.run_id, keys, max_attempts=self.max_attempts, retry_given_up=self.retry_given_up
        )

    def run(self, keys: list[EpisodeKey]) -> RunSummary:
        items = self.pending(keys)
        skipped = len(keys) - len(items)
        if skipped:
            log.info("resuming run %s: %d of %d episodes already stored", self.run_id, skipped, len(keys))
        work: queue.Queue[_Item] = queue.Queue()
        for item in items:
            work.put(item)
        outstanding = [len(items)]
        cond = threading.Condition()
        live_targets = list(self.targets)
        serials: dict[int, str] = {}  # filled by each worker (describe may talk to its phone)
        errors: list[BaseException] = []
        bar = tqdm(
            total=len(items), desc=f"{self.run_id}", unit="ep", disable=not self.progress, dynamic_ncols=True
        )

        def finish_one() -> None:
            with cond:
                outstanding[0] -= 1
                cond.notify_all()

        def another_may_run(target: Target, item: _Item, *, avoid: bool = True) -> bool:
            """Whether a live target other than `target` may run the item (and, with `avoid`, has
            not failed it before)."""
            with cond:
                others = [t for t in live_targets if t is not target]
            return any(
                not (avoid and serials.get(id(t)) in item.avoid) and self.eligible(t, item.key)
                for t in others
            )

        def worker(target: Target) -> None:
            serial = str(target.describe().get("serial", id(target)))
            with cond:
                serials[id(target)] = serial
            while True:
                with cond:
                    if outstanding[0] <= 0 or self.stop.is_set():
                        return
                try:
                    item = work.get(timeout=0.2)
                except queue.Empty:
                    continue
                if not self.eligible(target, item.key):
                    if another_may_run(target, item, avoid=False):
                        work.put(item)  # for a target that may run it
                        time.sleep(0.05)
                        continue
                    log.warning("%s: no live target may run it; not run", item.key.task)
                    bar.update(1)
                    finish_one()
                    continue
                if serial in item.avoid and another_may_run(target, item):
                    work.put(item)  # let another phone take the rerun
                    time.sleep(0.05)
                    continue
                healthy = getattr(target, "ready_for_episode", None)
                if callable(healthy) and not healthy():
                    log.warning("target %s is quarantined; its worker stops", serial)
                    work.put(item)
                    with cond:
                        live_targets.remove(target)
                    return
                try:
                    result = self.execute(target, item.key)
                    if not result.outcome.scored and self._stopping():
                        # its target was closed under it by the stop: not the device's abort
                        result.outcome = Outcome.INTERRUPTED
                        result.error = f"interrupted ({result.error})" if result.error else "interrupted"
                    self.store.write_episode(self.run_id, item.key, item.attempt, self.pack.app, result)
                except BaseException as exc:  # a bug, not a device failure: stop the run loudly
                    if self._stopping():
                        # cut short by the stop: nothing to record, a rerun runs it
                        log.warning("%s: not recorded after the stop (%r)", item.key.task, exc)
                        return
                    errors.append(exc)
                    with cond:
                        outstanding[0] = 0
                        cond.notify_all()
                    return
                if self.stop.is_set():
                    return
                after = getattr(target, "after_episode", None)
                if callable(after):
                    after(result)
                if result.outcome is Outcome.ENV_INVALID and item.attempt < item.last_attempt:
                    work.put(_Item(item.key, item.attempt + 1, item.avoid | {serial}, item.last_attempt))
                    bar.set_postfix_str(f"rerun {item.key.task} ({result.error or 'env_invalid'})"[:60])
                    continue
                bar.update(1)
                finish_one()

        def finished_when_done(target: Target, finished: threading.Event) -> None:
            try:
                worker(target)
            finally:
                finished.set()

        self._finished = [threading.Event() for _ in self.targets]
        threads = [
            threading.Thread(target=finished_when_done, args=(t, f), daemon=True, name=f"worker-{i}")
            for i, (t, f) in enumerate(zip(self.targets, self._finished, strict=True))
        ]
        for t in threads:
            t.start()
        try:
            for finished in self._finished:
                while not finished.wait(0.25):
                    pass
        except KeyboardInterrupt:
            self.stop.set()  # the caller closes the targets, which ends the episodes in flight
            bar.close()
            raise
        bar.close()
        if errors:
            exc = errors[0]
            if isinstance(exc, RealbenchError):
                raise exc
            raise RuntimeError(f"episode worker failed: {exc!r}") from exc
        if outstanding[0] > 0:
            log.warning("%d episodes were not run: every target was quarantined", outstanding[0])
        self.not_run = max(0, outstanding[0])
        return run_summary(self.store, self.run_id, max_attempts=self.max_attempts, not_run=self.not_run)

    def _stopping(self) -> bool:
        """Whether the run is being stopped, waiting `STOP_GRACE_S` for a stop that may be on its way.

        A terminal's Ctrl-C reaches the whole process group at once: the browser and its driver die
        of it while this process's main thread has yet to turn the signal into `stop`, and an episode
        that failed in between would be recorded as the device's failure (an abort, counted against
        the target) instead of as interrupted."""
        return self.stop.is_set() or self.stop.wait(STOP_GRACE_S)

    def wait_stopped(self, timeout_s: float) -> int:
        """After a stop: wait for the workers to record the episodes cut short; returns how many
        workers were still busy when `timeout_s` ran out."""
        self.stop.set()
        deadline = time.monotonic() + timeout_s
        for finished in self._finished:
            finished.wait(max(0.0, deadline - time.monotonic()))
        return sum(not finished.is_set() for finished in self._finished)
