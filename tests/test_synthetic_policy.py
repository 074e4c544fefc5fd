"""Synthetic policies: labelled, deterministic per seed, and following the documented skill model."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from realbench.actions import Click, Terminate, Type
from realbench.agents import make_agent
from realbench.agents.synthetic import PROFILES, Mistake, SyntheticPolicy, skill, task_gain
from realbench.errors import UnknownNameError
from realbench.observation import Observation, Screenshot
from realbench.taskpack import parse_pack

XML = (
    '<hierarchy rotation="0">'
    '<node text="出发地" resource-id="app:id/from" class="android.widget.TextView" bounds="[0,100][1080,200]" clickable="true"/>'
    '<node text="" resource-id="app:id/date" class="android.widget.EditText" bounds="[0,250][1080,350]" clickable="true"/>'
    '<node text="3月5日" class="android.widget.TextView" bounds="[0,400][540,500]" clickable="true"/>'
    '<node text="3月6日" class="android.widget.TextView" bounds="[540,400][1080,500]" clickable="true"/>'
    '<node text="查询" resource-id="app:id/search" class="android.widget.Button" bounds="[0,2000][1080,2150]" clickable="true"/>'
    "</hierarchy>"
)


def _pack(n_tasks: int = 1, difficulty: int = 2):
    return parse_pack(
        {
            "app": "t",
            "clone": "t",
            "real_app": {"package": "com.example.app", "name": "x"},
            "tasks": [
                {
                    "id": f"task{i}",
                    "instruction": "查询3月5日的车票",
                    "difficulty": difficulty,
                    "clone": {"verifier": {"name": "v"}},
                    "judge": {"rubric": "r"},
                    "golden": [
                        {"tap": {"text": "出发地"}},
                        {"type": {"text": "2026-03-05", "into": {"resource_id": "date"}}},
                        {"tap": {"text": "3月5日"}},
                        {"tap": {"resource_id": "search"}},
                        {"terminate": "success"},
                    ],
                }
                for i in range(n_tasks)
            ],
        }
    )


def _obs() -> Observation:
    buf = io.BytesIO()
    Image.new("RGB", (1080, 2400)).save(buf, format="PNG")
    return Observation(screenshot=Screenshot.from_bytes(buf.getvalue()), hierarchy=XML)


OBS = _obs()


def _episode(policy: SyntheticPolicy, instance, max_steps: int = 15) -> list:
    policy.reset(instance)
    steps = []
    for _ in range(max_steps):
        step = policy.act(OBS, [])
        steps.append(step)
        if step.action is None or step.action.is_final:
            break
    return steps


def test_names_and_labels():
    pack = _pack()
    policy = make_agent("synthetic:base", pack=pack, seed=3)
    assert policy.name == "synthetic:base"
    steps = _episode(policy, pack.tasks[0].instantiate(0, today=__import__("datetime").date(2026, 3, 1)))
    assert all(s.extra["synthetic"] is True and s.extra["policy"] == "synthetic:base" for s in steps)
    assert all(s.thought.startswith("[synthetic:base]") for s in steps)
    with pytest.raises(UnknownNameError):
        SyntheticPolicy("genius")


def test_deterministic_per_seed():
    from datetime import date

    pack = _pack()
    runs = {}
    for seed in (0, 0, 1):
        actions = []
        policy = SyntheticPolicy("weak", seed=seed)
        for s in range(20):
            instance = pack.tasks[0].instantiate(s, today=date(2026, 3, 1))
            actions.append([st.action for st in _episode(policy, instance)])
        runs.setdefault(seed, []).append(actions)
    assert runs[0][0] == runs[0][1]  # same seed, same behaviour
    assert runs[0][0] != runs[1][0]  # another seed, other mistakes


def test_skill_model_shape():
    ids = [f"task{i}" for i in range(200)]
    base = np.array([skill(PROFILES["base"], t, 2) for t in ids])
    trained = np.array([skill(PROFILES["trained"], t, 2) for t in ids])
    assert trained.mean() > base.mean() + 0.05
    gains = np.array([task_gain(PROFILES["trained"], t) for t in ids])
    assert (gains < 0).any() and (gains > 1).any()  # training helps unevenly
    assert skill(PROFILES["base"], "x", 1) > skill(PROFILES["base"], "x", 4)
    assert skill(PROFILES["base"], "x", 2) == skill(PROFILES["base"], "x", 2)


def test_mistake_rate_matches_the_skill_model():
    from datetime import date

    pack = _pack(difficulty=3)
    policy = SyntheticPolicy("base", seed=0)
    clean = 0
    kinds: set[str] = set()
    n = 300
    for s in range(n):
        instance = pack.tasks[0].instantiate(s, today=date(2026, 3, 1))
        policy.reset(instance)
        clean += policy._mistake is None
        if policy._mistake:
            kinds.add(policy._mistake.value)
    p = policy.p_clean
    assert abs(clean / n - p) < 3 * np.sqrt(p * (1 - p) / n) + 0.01
    assert kinds == {m.value for m in Mistake}


def test_mistakes_are_realistic_actions():
    from datetime import date

    pack = _pack()
    policy = SyntheticPolicy("weak", seed=0)
    golden = SyntheticPolicy(
        "strong", seed=0, model=PROFILES["strong"].model_copy(update={"intercept": 50.0})
    )
    plan = [s.action for s in _episode(golden, pack.tasks[0].instantiate(0, today=date(2026, 3, 1)))]
    assert isinstance(plan[-1], Terminate) and Type(text="2026-03-05") in plan
    seen: dict[str, list] = {}
    for s in range(60):
        actions = [st.action for st in _episode(policy, pack.tasks[0].instantiate(s, today=date(2026, 3, 1)))]
        if policy._mistake:
            seen.setdefault(policy._mistake.value, []).append(actions)
    # a wrong item is a tap on another control, not a random point
    wrong = [a for run in seen["wrong_item"] for a in run if isinstance(a, Click) and a not in plan]
    assert wrong and all(a.y < 1000 for a in wrong)
    # a wrong value differs from the planned text in one digit
    typed = [a.text for run in seen["wrong_value"] for a in run if isinstance(a, Type)]
    assert typed and all(t != "2026-03-05" and len(t) == len("2026-03-05") for t in typed)
    # early termination stops before the plan's last tap
    assert all(len(run) < len(plan) for run in seen["early_terminate"])


def test_synthetic_episodes_carry_the_synthetic_name():
    from datetime import date

    from realbench.episode import run_episode
    from realbench.taskpack import parse_pack
    from tests.scripted import PACK as SCRIPTED
    from tests.scripted import ScriptedTarget

    pack = parse_pack(SCRIPTED)
    instance = pack.task("submit").instantiate(0, date(2026, 3, 2))
    strong = SyntheticPolicy(
        "strong", seed=0, model=PROFILES["strong"].model_copy(update={"intercept": 50.0})
    )
    result = run_episode(instance, ScriptedTarget(), strong)
    assert result.agent == "synthetic:strong" and result.outcome.value == "success"
    assert all(s.extra["synthetic"] for s in result.steps)
