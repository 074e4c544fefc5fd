"""Environment workers as Ray actors on a small local Ray cluster: batched steps, branching across
actors, and a killed actor (its episodes aborted, a new actor in its place)."""

from __future__ import annotations

import numpy as np
import pytest

from devices.rl.vector import CloneVectorEnv
from tests.rl_support import write_pack

pytestmark = [pytest.mark.slow, pytest.mark.browser]

ray = pytest.importorskip("ray")

CLICK_LIST = '{"type": "click", "x": 500, "y": 180}'


@pytest.fixture(scope="module")
def cluster():
    from devices.rl.config import REPO_ROOT

    ray.init(
        num_cpus=2,
        include_dashboard=False,
        logging_level="ERROR",
        runtime_env={"env_vars": {"PYTHONPATH": str(REPO_ROOT)}},
    )
    yield
    ray.shutdown()


def test_ray_actors_host_environments(cluster, tmp_path):
    pack = write_pack(tmp_path)
    venv = CloneVectorEnv(
        2, str(pack), "buy-item", workers=2, backend="ray", imports=("tests.other_toy:register_other_toy",)
    )
    try:
        assert {venv.pool.slot(k).worker for k in venv.keys} == {0, 1}
        obs, infos = venv.reset(seed=7)
        assert obs["screenshot"].shape == (2, 995, 448, 3) and infos["seed"].tolist() == [7, 8]
        obs, rewards, terminated, truncated, _ = venv.step([CLICK_LIST, None])
        assert "商品00" in obs["hierarchy"][0] and "商品00" not in obs["hierarchy"][1]
        obs, infos = venv.branch(0, [1])  # actor 0's state into actor 1
        assert np.array_equal(obs["screenshot"][0], obs["screenshot"][1]) and infos["step"][1] == 1
        stats = venv.pool.stats()
        assert len({s["pid"] for s in stats}) == 2 and all(s["browser_running"] for s in stats)

        lost = venv.pool.workers[1]
        lost.kill()
        _, _, _, truncated, infos = venv.step([CLICK_LIST, CLICK_LIST])
        assert truncated.tolist() == [False, True] and infos["aborted"].tolist() == [False, True]
        assert venv.pool.workers[1] is not lost and venv.pool.replaced == 1
        obs, _ = venv.reset(seed=1, options={"reset_mask": np.array([False, True])})
        _, _, _, truncated, infos = venv.step([None, CLICK_LIST])
        assert not truncated.any() and infos["step"][1] == 1
    finally:
        venv.close()


def test_ray_actors_run_the_renderers_asked_for_their_replacements_too(cluster, tmp_path):
    # two environments per actor open two pages at once: without the limit each gets a renderer
    venv = CloneVectorEnv(4, str(write_pack(tmp_path)), "buy-item", workers=2, backend="ray", renderers=1)
    try:
        venv.reset(seed=0)
        assert [s["renderer_processes"] for s in venv.pool.stats()] == [1, 1]
        venv.pool.workers[0].kill()
        venv.step([CLICK_LIST] * 4)  # the lost actor's episodes abort; a new actor takes them
        venv.reset(seed=1)
        assert venv.pool.replaced == 1
        assert [s["renderer_processes"] for s in venv.pool.stats()] == [1, 1]
    finally:
        venv.close()
