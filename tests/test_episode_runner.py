"""The episode loop, the run store and the local runner, on a scripted target (a test double)."""

import json
import threading

import pytest

from realbench.actions import Click, Type
from realbench.agent import AgentStep
from realbench.episode import run_episode
from realbench.errors import StoreError
from realbench.golden import GoldenAgent
from realbench.outcome import EndReason, Outcome, Verdict, VerdictSource
from realbench.runner import LocalRunner, plan_episodes, summarize
from realbench.store import EpisodeKey, RunStore
from realbench.taskpack import parse_pack
from tests.scripted import PACK, ScriptedTarget

pack = parse_pack(PACK)


def instance(task_id, seed=0):
    task = pack.task(task_id)
    return task.instantiate(seed, task.clone.setup.clock.date())


def test_golden_reaches_boundary_on_clone_and_is_verified():
    target = ScriptedTarget()
    result = run_episode(instance("submit"), target, GoldenAgent())
    assert result.end_reason is EndReason.BOUNDARY
    assert result.outcome is Outcome.SUCCESS
    assert len(result.steps) == 3
    assert "提交订单" in (result.steps[-1].boundary or "")
    assert len(target.device.acts) == 3  # the boundary tap was delivered: clones are safe


def test_boundary_is_not_delivered_where_it_is_unsafe():
    target = ScriptedTarget(delivers_boundary=False)
    result = run_episode(instance("submit"), target, GoldenAgent())
    assert result.outcome is Outcome.BOUNDARY_REACHED
    assert len(target.device.acts) == 2
    assert target.device.screen == 2


def test_plan_that_cannot_continue_is_an_agent_failure():
    result = run_episode(instance("lost"), ScriptedTarget(), GoldenAgent())
    assert result.outcome is Outcome.FAILURE
    assert result.end_reason is EndReason.TERMINATE
    assert "no control matches" in (result.steps[-1].error or "")


def test_step_budget():
    result = run_episode(instance("budget"), ScriptedTarget(), GoldenAgent())
    assert result.end_reason is EndReason.STEP_BUDGET
    assert result.outcome is Outcome.STEP_BUDGET


def test_device_failure_is_env_invalid_not_agent_failure():
    result = run_episode(instance("submit"), ScriptedTarget(fail_after=1), GoldenAgent())
    assert result.outcome is Outcome.ENV_INVALID
    assert result.end_reason is EndReason.ABORT
    assert "disconnected" in result.error


class Garbage:
    name = "garbage"

    def __init__(self, bad=10):
        self.bad = bad

    def reset(self, instance):
        self.n = 0

    def act(self, observation, history):
        self.n += 1
        if self.n <= self.bad:
            return AgentStep(action=None, raw="<tool_call>{oops", error="unparseable")
        return AgentStep(action=Type(text="x"), raw="ok")


def test_format_errors_end_the_episode_after_k_in_a_row():
    result = run_episode(instance("submit"), ScriptedTarget(), Garbage(), max_format_errors=3)
    assert result.outcome is Outcome.FORMAT_ERROR
    assert result.format_errors == 3
    assert result.steps[0].raw == "<tool_call>{oops"


def test_format_errors_below_the_limit_do_not_end_it():
    result = run_episode(instance("budget"), ScriptedTarget(), Garbage(bad=1), max_format_errors=3)
    assert result.format_errors == 1
    assert result.outcome is Outcome.STEP_BUDGET


def test_store_round_trip(tmp_path):
    store = RunStore(tmp_path)
    store.ensure_run("r", pack="scripted", app="scripted", agent="golden", target="clone", config={})
    result = run_episode(instance("submit"), ScriptedTarget(), GoldenAgent())
    eid = store.write_episode("r", EpisodeKey("submit", 0, 0), 0, "scripted", result)
    steps = store.steps(eid)
    assert [s["action"]["type"] for s in steps] == ["click", "click", "click"]
    assert (store.episode_dir(eid) / steps[0]["screenshot"]).read_bytes()[:4] == b"\x89PNG"
    assert (store.episode_dir(eid) / "final.xml").exists()
    frame = store.episodes_frame()
    row = frame.iloc[0]
    assert (row["task"], row["model"], row["env"], row["outcome"], row["success"]) == (
        "submit",
        "golden",
        "clone",
        "success",
        True,
    )
    store.add_verdict(eid, Verdict(success=False, source=VerdictSource.JUDGE, name="j1", reason="unsure"))
    store.add_verdict(eid, Verdict(success=True, source=VerdictSource.JUDGE, name="j1", reason="sure"))
    store.add_label(eid, "alice", True)
    sources = [(v.source, v.name, v.success) for v in store.verdicts(eid)]
    assert sources == [
        (VerdictSource.VERIFIER, "", True),
        (VerdictSource.JUDGE, "j1", True),
        (VerdictSource.HUMAN, "alice", True),
    ]
    with pytest.raises(StoreError):
        store.add_verdict("nope", Verdict(success=True))
    paths = store.export_parquet(tmp_path / "pq")
    import pandas as pd

    assert len(pd.read_parquet(paths[0])) == 1
    with pytest.raises(StoreError, match="made with"):
        store.ensure_run("r", pack="scripted", app="scripted", agent="other", target="clone", config={})


def test_store_refuses_non_store(tmp_path):
    with pytest.raises(StoreError, match="not a run store"):
        RunStore(tmp_path / "empty", create=False)


def test_runner_reruns_aborts_on_another_target_and_resumes(tmp_path):
    store = RunStore(tmp_path)
    store.ensure_run("r", pack="scripted", app="scripted", agent="golden", target="clone", config={})
    flaky = ScriptedTarget("flaky", fail_after=0)
    good = ScriptedTarget("good")
    keys = plan_episodes(pack, task_ids=["submit"], repeats=4)
    runner = LocalRunner(store, "r", pack, [flaky, good], GoldenAgent, progress=False)
    summary = runner.run(keys).data
    assert summary["episodes"] == 4 and summary["successes"] == 4
    assert summary["outcomes"].get("env_invalid", 0) >= 1  # the flaky phone failed at least once
    assert summary["devices"]["flaky"]["flake_rate"] == 1.0
    # resume: nothing left to do, nothing done twice
    again = LocalRunner(store, "r", pack, [good], GoldenAgent, progress=False).run(keys).data
    assert again == summary
    frame = store.episodes_frame()
    scored = frame[frame["scored"]]
    assert not scored.duplicated(["task", "seed", "repeat"]).any()


def test_attempts_are_bounded(tmp_path):
    store = RunStore(tmp_path)
    store.ensure_run("r", pack="scripted", app="scripted", agent="golden", target="clone", config={})
    keys = plan_episodes(pack, task_ids=["submit"], repeats=1)
    summary = (
        LocalRunner(
            store,
            "r",
            pack,
            [ScriptedTarget("dead", fail_after=0)],
            GoldenAgent,
            max_attempts=2,
            progress=False,
        )
        .run(keys)
        .data
    )
    assert summary["episodes"] == 0 and summary["aborted"] == 1 and summary["outcomes"] == {"env_invalid": 2}
    assert summarize(store, "r").data["abort_rate"] == 1.0


def test_store_is_safe_across_threads(tmp_path):
    store = RunStore(tmp_path)
    store.ensure_run("r", pack="scripted", app="scripted", agent="golden", target="clone", config={})
    result = run_episode(instance("submit"), ScriptedTarget(), GoldenAgent())

    def write(i):
        store.write_episode("r", EpisodeKey("submit", i, i), 0, "scripted", result)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(store.episodes_frame()) == 16
    meta = json.loads((store.episode_dir("r/submit/s5/r5/a0") / "episode.json").read_text())
    assert meta["outcome"] == "success"


def test_golden_type_into_taps_then_types():
    from tests.scripted import ScriptedDevice

    agent = GoldenAgent()
    raw = json.loads(json.dumps(PACK))
    raw["tasks"][0]["golden"] = [{"type": {"text": "北京", "into": {"text": "开始"}}}]
    inst = parse_pack(raw).task("submit").instantiate(0, pack.task("submit").clone.setup.clock.date())
    agent.reset(inst)
    obs = ScriptedDevice("x").observe()
    first = agent.act(obs, []).action
    second = agent.act(obs, []).action
    assert isinstance(first, Click) and second == Type(text="北京")


def test_half_written_episode_of_a_dead_process_is_swept(tmp_path):
    store = RunStore(tmp_path)
    store.ensure_run("r", pack="scripted", app="scripted", agent="golden", target="clone", config={})
    store.close()
    dead = tmp_path / "episodes" / "r" / "submit-s0-r0-a0.tmp999999999-1"
    dead.mkdir(parents=True)
    (dead / "steps.jsonl").write_text("{}")
    alive = tmp_path / "episodes" / "r" / f"submit-s1-r1-a0.tmp{__import__('os').getpid()}-1"
    alive.mkdir()
    RunStore(tmp_path)
    assert not dead.exists() and alive.exists()


def test_real_episodes_stay_undecided_until_a_verdict_arrives(tmp_path):
    store = RunStore(tmp_path)
    store.ensure_run("r", pack="scripted", app="scripted", agent="golden", target="real", config={})
    keys = plan_episodes(pack, task_ids=["submit", "lost"], repeats=1)
    targets = [ScriptedTarget("phone", delivers_boundary=False)]
    summary = LocalRunner(store, "r", pack, targets, GoldenAgent, progress=False).run(keys).data
    assert summary["outcomes"] == {"boundary_reached": 1, "unverified": 1}
    assert summary["undecided"] == 2 and summary["successes"] == 0 and summary["success_rate"] is None
    frame = store.episodes_frame()
    eid = frame[frame["task"] == "submit"]["episode_id"].iloc[0]
    store.add_verdict(eid, Verdict(success=True, source=VerdictSource.JUDGE, name="j"))
    store.add_verdict(
        eid, Verdict(success=False, source=VerdictSource.JUDGE, name="k", abstained=True, cost_usd=0.01)
    )
    summary = summarize(store, "r").data
    assert summary["successes"] == 1 and summary["undecided"] == 1 and summary["success_rate"] == 1.0
    store.add_label(eid, "alice", False)  # a human label outranks the judge
    assert summarize(store, "r").data["successes"] == 0
    assert store.verdicts(eid)[1].cost_usd == 0.01
