import pytest

from realbench.episode import run_episode
from realbench.errors import ConfigError
from realbench.golden import GoldenAgent
from realbench.judge.synthetic import SyntheticJudge
from realbench.outcome import VerdictSource
from realbench.store import EpisodeKey, RunStore
from realbench.taskpack import parse_pack
from tests.scripted import PACK, ScriptedTarget


def test_error_rates_match_the_settings():
    judge = SyntheticJudge(sensitivity=0.8, specificity=0.6, seed=3)
    pos = [judge.verdict(f"e{i}", True).success for i in range(4000)]
    neg = [judge.verdict(f"n{i}", False).success for i in range(4000)]
    assert abs(sum(pos) / 4000 - 0.8) < 0.03
    assert abs(1 - sum(neg) / 4000 - 0.6) < 0.03
    assert judge.verdict("e1", True) == judge.verdict("e1", True)  # seeded per episode


def test_it_is_labelled_and_validated():
    with pytest.raises(ConfigError):
        SyntheticJudge(name="qwen-judge")
    with pytest.raises(ConfigError):
        SyntheticJudge(sensitivity=1.5)
    v = SyntheticJudge().verdict("x", True)
    assert (
        v.name.startswith("synthetic:") and v.source is VerdictSource.JUDGE and "synthetic judge" in v.reason
    )


def test_judge_store_uses_verifier_truth_only(tmp_path):
    pack = parse_pack(PACK)
    store = RunStore(tmp_path)
    store.ensure_run("r", pack="scripted", app="scripted", agent="golden", target="clone", config={})
    for i, (task, delivers) in enumerate([("submit", True), ("submit", False), ("lost", True)]):
        t = pack.task(task)
        result = run_episode(
            t.instantiate(i, t.clone.setup.clock.date()),
            ScriptedTarget(delivers_boundary=delivers),
            GoldenAgent(),
        )
        store.write_episode("r", EpisodeKey(task, i, i), 0, "scripted", result)
    store.close()
    counts = SyntheticJudge(sensitivity=1.0, specificity=1.0).judge_store(tmp_path)
    assert counts == {"judged": 2, "skipped_no_truth": 1, "said_success": 1}
