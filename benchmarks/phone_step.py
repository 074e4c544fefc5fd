"""Per-step cost of the farm's runner against the same raw uiautomator2 calls, and episodes/hour.

On a virtual phone (a test rig behind the real adb server, hosted in its own process):

- raw: a loop of uiautomator2 3.7 calls, made directly — per step the calls the runner makes
  for one `real` step (screenshot, hierarchy, deviceInfo, the interlock's fresh hierarchy and its
  re-read right before the input, click),
  plus the two observations every episode ends with (the one the agent stops on, the final one);
- runner: `run_episode` on a `real` PhoneTarget (interlock armed) with a synthetic agent that
  taps a safe point each step (labelled synthetic: no model cost), setup excluded.

Both are interleaved over several rounds and the medians compared (`runner_over_raw_ratio`).
`episodes_per_hour` is one phone running the synthetic farm pack (3 plan steps) through the
local runner with health checks, setup and store writes — the throughput of a virtual phone.

    python benchmarks/phone_step.py --json
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from devices.farm.synthetic import synthetic_pack  # noqa: E402
from devices.settle import SettlePolicy  # noqa: E402
from realbench.actions import Click  # noqa: E402
from realbench.agent import AgentStep, HistoryItem  # noqa: E402
from realbench.observation import Observation  # noqa: E402
from realbench.taskpack import TaskInstance  # noqa: E402

SAFE_POINT = (500, 150)  # the static ticket screen's search field: nothing commits there


class SafeTapper:
    """Synthetic agent: taps one safe point every step, then terminates (no model, no cost)."""

    name = "synthetic:safe-tapper"

    def __init__(self, steps: int) -> None:
        self.steps = steps

    def reset(self, instance: TaskInstance) -> None:
        pass

    def act(self, observation: Observation, history: list[HistoryItem]) -> AgentStep:
        from realbench.actions import Terminate

        if len(history) >= self.steps:
            return AgentStep(action=Terminate())
        return AgentStep(action=Click(x=SAFE_POINT[0], y=SAFE_POINT[1]))


def start_phone_host() -> tuple[subprocess.Popen[bytes], str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "devices.virtual.serve",
            "--n",
            "1",
            "--screens",
            "static",
            "--log-level",
            "WARNING",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    info = json.loads(line)
    serial = info["phones"][0]["serial"]
    out = subprocess.run(["adb", "connect", serial], capture_output=True, text=True, timeout=20).stdout
    if "connected" not in out:
        raise RuntimeError(f"adb connect {serial}: {out}")
    return proc, serial


def stop_phone_host(proc: subprocess.Popen[bytes], serial: str) -> None:
    subprocess.run(["adb", "disconnect", serial], capture_output=True, timeout=20)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def raw_episode(d: Any, steps: int, px: tuple[int, int]) -> float:
    """The runner's calls for one episode, straight through uiautomator2: per step an observation
    and a tap (with the interlock's fresh hierarchy), then the observation on which the agent
    decides to stop, then the final observation the episode records."""
    t0 = time.perf_counter()
    for _ in range(steps):
        d.jsonrpc.takeScreenshot(1, 80)
        d.dump_hierarchy()
        d.info  # noqa: B018 - deviceInfo: foreground package and display size
        d.dump_hierarchy()  # the interlock's fresh look before the tap
        d.dump_hierarchy()  # and its re-read right before it (the decision is redone if it changed)
        d.click(*px)
    for _ in range(2):
        d.jsonrpc.takeScreenshot(1, 80)
        d.dump_hierarchy()
        d.info  # noqa: B018
    return time.perf_counter() - t0


def runner_episode(target: Any, instance: TaskInstance, steps: int) -> float:
    from realbench.episode import run_episode

    spent_in_setup = [0.0]
    setup = target.setup

    def timed_setup(inst: TaskInstance) -> None:
        t = time.perf_counter()
        setup(inst)
        spent_in_setup[0] = time.perf_counter() - t

    target.setup = timed_setup
    try:
        t0 = time.perf_counter()
        result = run_episode(instance, target, SafeTapper(steps))
        total = time.perf_counter() - t0
    finally:
        target.setup = setup
    assert result.error is None, result.error
    assert len(result.steps) == steps + 1, (
        result.end_reason,
        len(result.steps),
        [s.boundary or s.error for s in result.steps],
    )
    return total - spent_in_setup[0]


def measure(*, rounds: int = 7, steps: int = 5, episodes: int = 12) -> dict[str, Any]:
    import uiautomator2 as u2

    from devices.farm.rig_targets import targets_from_rig
    from devices.phone import PhoneDevice
    from devices.phone_target import PhoneTarget
    from devices.rig import parse_rig
    from realbench.device import TargetKind
    from realbench.golden import GoldenAgent
    from realbench.runner import LocalRunner, plan_episodes
    from realbench.store import RunStore

    proc, serial = start_phone_host()
    try:
        long_pack = synthetic_pack(tasks=1, steps=steps, with_boundary=True)  # max_steps > steps
        task = long_pack.tasks[0]
        instance = task.instantiate(0, task.clone.setup.clock.date())
        phone = PhoneDevice(serial, virtual=True)
        target = PhoneTarget(phone, long_pack, TargetKind.REAL)
        # the same runner without waiting for the screen to settle: what the wait costs
        quick = PhoneDevice(serial, virtual=True, settle=SettlePolicy(enabled=False))
        quick_target = PhoneTarget(quick, long_pack, TargetKind.REAL)
        d = u2.connect(serial)
        px = phone.to_pixels(*SAFE_POINT)
        phone.start_app(long_pack.real_app.package)
        raw, runner, unsettled = [], [], []
        for _ in range(rounds):  # interleaved, so machine load hits all alike
            raw.append(raw_episode(d, steps, px) / steps)
            runner.append(runner_episode(target, instance, steps) / steps)
            unsettled.append(runner_episode(quick_target, instance, steps) / steps)
        raw_s, runner_s = statistics.median(raw), statistics.median(runner)
        unsettled_s = statistics.median(unsettled)
        settle_per_wait = phone.stats.settle_s / max(1, phone.stats.settle_waits)
        settle_timeouts = phone.stats.settle_timeouts
        phone.close()
        quick.close()

        pack = synthetic_pack(tasks=1, steps=1, with_boundary=True)
        task = pack.tasks[0]
        rig = parse_rig(
            {
                "name": "bench",
                "phones": [{"serial": serial, "profile": "generic-1080x2400", "virtual": True}],
                "apps": [{"package": pack.real_app.package, "version": "5.8.0.8"}],
            }
        )
        with tempfile.TemporaryDirectory() as tmp, targets_from_rig(rig, pack, "real") as targets:
            store = RunStore(Path(tmp) / "store")
            store.ensure_run("bench", pack=pack.app, app=pack.app, agent="golden", target="real", config={})
            keys = plan_episodes(pack, repeats=episodes)
            t0 = time.perf_counter()
            summary = LocalRunner(store, "bench", pack, targets, GoldenAgent, progress=False).run(keys).data
            wall = time.perf_counter() - t0
            store.close()
        assert summary["outcomes"] == {"boundary_reached": episodes}, summary
    finally:
        stop_phone_host(proc, serial)
    return {
        "device": "virtual-phone (test rig behind the real adb server, own process)",
        "target": "real (interlock armed)",
        "steps_per_episode": steps,
        "rounds": rounds,
        "raw_step_s": round(raw_s, 4),
        "runner_step_s": round(runner_s, 4),
        "runner_over_raw_ratio": round(runner_s / raw_s, 3),
        "runner_step_s_without_settle": round(unsettled_s, 4),
        "settle_overhead_s_per_step": round(runner_s - unsettled_s, 4),
        "settle_wait_s_median_of_mean": round(settle_per_wait, 4),
        "settle_policy": "hierarchy unchanged for 0.2 s, polled every 0.05 s, at most 2 s",
        "settle_timeouts": settle_timeouts,
        "raw_calls_per_step": "takeScreenshot, dumpWindowHierarchy, deviceInfo, dumpWindowHierarchy, click "
        "(+ 2 observations per episode: the stop decision and the final screen)",
        "episodes": episodes,
        "episode_plan_steps": len(task.golden) - 1,
        "episode_s": round(wall / episodes, 3),
        "episodes_per_hour": round(3600 * episodes / wall, 1),
        "episodes_per_hour_note": "per phone; synthetic 3-step plan, health check + setup + store write included, no model latency",
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--episodes", type=int, default=12)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = measure(rounds=args.rounds, steps=args.steps, episodes=args.episodes)
    if args.json:
        print(json.dumps(figures, ensure_ascii=False))
        return
    for key, value in figures.items():
        print(f"{key:>24}: {value}")


if __name__ == "__main__":
    main()
