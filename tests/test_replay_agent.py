"""`--agent replay:STORE`: a stored run's episodes replayed, action for action, on a fresh target."""

from __future__ import annotations

from pathlib import Path

import pytest

from devices.pack_run import run_pack
from realbench.agents import make_agent
from realbench.errors import ConfigError, UnknownNameError
from realbench.run_config import RunConfig
from realbench.store import RunStore
from realbench.taskpack import TaskPack
from tests.conftest import TOY_PACK_PATH


def test_replay_of_a_folder_that_is_no_run_store_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a run store"):
        make_agent(f"replay:{tmp_path}")


@pytest.mark.browser
def test_replayed_run_repeats_the_stored_actions_and_outcomes(tmp_path: Path, toy_pack: TaskPack) -> None:
    stored, replayed = tmp_path / "golden", tmp_path / "replay"
    first = run_pack(RunConfig(pack=TOY_PACK_PATH, out=stored, agent="golden", repeats=2, progress=False))
    assert first["episodes"] == 2 * len(toy_pack.tasks) and first["successes"] == first["episodes"]
    # a second run in the store makes the source ambiguous until it is named
    run_pack(RunConfig(pack=TOY_PACK_PATH, out=stored, agent="golden", run_id="again", progress=False))
    with pytest.raises(ConfigError, match="holds 2 runs"):
        make_agent(f"replay:{stored}")
    with pytest.raises(UnknownNameError):
        make_agent(f"replay:{stored}#no-such-run")
    source = first["run_id"]
    again = run_pack(
        RunConfig(
            pack=TOY_PACK_PATH, out=replayed, agent=f"replay:{stored}#{source}", repeats=2, progress=False
        )
    )
    assert again["episodes"] == first["episodes"] and again["successes"] == first["successes"]
    with RunStore(stored, create=False) as a, RunStore(replayed, create=False) as b:
        fa = a.episodes_frame([source]).sort_values(["task", "seed"])
        fb = b.episodes_frame().sort_values(["task", "seed"])
        assert list(fa["seed"]) == list(fb["seed"])
        for ea, eb in zip(fa["episode_id"], fb["episode_id"], strict=True):
            actions_a = [s["action"] for s in a.steps(ea) if s.get("action")]
            actions_b = [s["action"] for s in b.steps(eb) if s.get("action")]
            assert actions_a == actions_b and actions_a
    # an instance the store never ran (another seed) is a configuration error, not a failure
    with pytest.raises(ConfigError, match="no scored episode"):
        run_pack(
            RunConfig(
                pack=TOY_PACK_PATH,
                out=tmp_path / "x",
                agent=f"replay:{stored}#{source}",
                seed=7,
                progress=False,
            )
        )
