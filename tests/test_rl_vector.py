"""The vectorised environment: N environments over two worker processes (one browser each),
batched steps, GRPO-style branching across workers, partial resets, and a lost worker."""

from __future__ import annotations

import os

import numpy as np
import pytest

from devices.rl.browser import chromium_processes
from devices.rl.config import EnvConfig
from devices.rl.errors import SnapshotMismatch
from devices.rl.gym_env import unwrap
from devices.rl.spaces import to_gym_observation
from devices.rl.vector import CloneVectorEnv
from devices.rl.workers import renderers_per_browser
from realbench.errors import ConfigError
from tests.rl_support import OTHER_PACK, write_pack

pytestmark = pytest.mark.browser

CLICK_LIST = '{"type": "click", "x": 500, "y": 180}'
BACK = '{"type": "key", "key": "back"}'


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    pack = write_pack(tmp_path_factory.mktemp("pack"))
    # without the screen cache: restored environments' pixels are compared as captured
    env = CloneVectorEnv(
        4,
        str(pack),
        "buy-item",
        workers=2,
        imports=("tests.other_toy:register_other_toy",),
        screen_cache=False,
    )
    yield env
    env.close()


def test_steps_all_environments_in_one_call(venv):
    obs, infos = venv.reset(seed=10)
    assert obs["screenshot"].shape == venv.observation_space["screenshot"].shape == (4, 995, 448, 3)
    assert venv.observation_space.contains(obs)
    assert list(infos["seed"]) == [10, 11, 12, 13]
    assert {s.worker for s in venv.pool._slots.values()} == {0, 1}  # spread over both workers
    obs, rewards, terminated, truncated, infos = venv.step([CLICK_LIST] * 4)
    assert rewards.tolist() == [0.0] * 4 and not terminated.any() and not truncated.any()
    assert all("商品列表" in h and "商品00" in h for h in obs["hierarchy"])
    assert infos["step"].tolist() == [1, 1, 1, 1]
    # None leaves an environment as it was
    obs, rewards, _, _, infos = venv.step([BACK, None, None, None])
    assert infos["skipped"].tolist() == [False, True, True, True]
    assert "商品00" not in obs["hierarchy"][0] and "商品00" in obs["hierarchy"][1]
    with pytest.raises(ConfigError):
        venv.step([BACK])


def test_observations_a_caller_keeps_are_not_written_over_by_later_steps(venv):
    """Batches go into arrays returned before once nobody holds them (devices/rl/batch_arrays.py)."""
    obs, _ = venv.reset(seed=20)
    kept_whole, kept_view = obs["screenshot"], obs["screenshot"][0]
    copy = kept_whole.copy()
    obs = None
    # counted from here: the module's venv may hold batches of earlier tests
    reused, made = venv._batches.reused, venv._batches.made
    for action in (CLICK_LIST, BACK, CLICK_LIST, BACK, CLICK_LIST):  # ends on another screen
        obs, *_ = venv.step([action] * 4)
    assert not np.array_equal(obs["screenshot"][0], copy[0])  # the screen did change
    np.testing.assert_array_equal(kept_whole, copy)
    np.testing.assert_array_equal(kept_view, copy[0])
    # the kept batch and the one the loop holds while it steps are never written into; from the
    # third step on there is a third one nobody holds
    assert venv._batches.reused - reused >= 3 and venv._batches.made - made <= 2


def test_group_rollouts_branch_from_one_snapshot_across_workers(venv):
    venv.reset(seed=3)
    venv.step([CLICK_LIST, None, None, None])
    snap = venv.snapshot(0)
    obs, infos = venv.restore(snap, [1, 2, 3])
    shots = obs["screenshot"]
    assert all(np.array_equal(shots[0], shots[i]) for i in (1, 2, 3))
    assert len(set(obs["hierarchy"])) == 1
    assert infos["step"][1:].tolist() == [1, 1, 1]
    assert len(set(venv.pool.slot(k).worker for k in venv.keys)) == 2  # branches live in both browsers
    # the branches diverge independently
    obs, _, _, _, _ = venv.step([None, BACK, CLICK_LIST, None])
    assert "商品00" not in obs["hierarchy"][1] and obs["hierarchy"][2] != obs["hierarchy"][1]
    verdicts = venv.verdicts()
    assert [v["success"] for v in verdicts] == [False] * 4


def test_new_environments_restored_into_a_snapshot_show_the_source_pixels(venv):
    """Environments created after the snapshot, whose pages never showed anything else, give the
    source's pixels on their first restore. (With pages born at the emulation's scale, one of three
    such environments differed by a pixel row of text in most trials.)"""
    venv.reset(seed=3)
    obs, *_ = venv.step([CLICK_LIST, None, None, None])
    snap = venv.snapshot(0)
    keys = [int(unwrap(k)) for k in venv.pool.create([venv.config] * 6)]
    try:
        restored = [unwrap(r) for r in venv.pool.restore([(k, snap) for k in keys])]
        differing = [
            key
            for key, transition in zip(keys, restored, strict=True)
            if not np.array_equal(
                to_gym_observation(transition.observation, venv.config)["screenshot"], obs["screenshot"][0]
            )
        ]
        assert differing == []
    finally:
        venv.pool.close_envs(keys)


def test_partial_reset(venv):
    venv.reset(seed=0)
    venv.step([CLICK_LIST] * 4)
    obs, infos = venv.reset(seed=0, options={"reset_mask": np.array([True, False, True, False])})
    assert infos["_step"].tolist() == [True, False, True, False]
    assert "商品00" not in obs["hierarchy"][0] and "商品00" in obs["hierarchy"][1]


def test_restore_of_another_clone_is_refused(venv, tmp_path):
    config = EnvConfig(pack=str(write_pack(tmp_path, OTHER_PACK)), task_id="buy-item")
    [key] = venv.pool.create([config])
    try:
        assert isinstance(key, int)
        venv.pool.reset([(key, 0, None)])
        [snap] = venv.pool.snapshot([key])
        with pytest.raises(SnapshotMismatch, match="toy_other"):
            venv.restore(snap, [0])
    finally:
        venv.pool.close_envs([key])
    venv.reset(seed=0)
    _, _, terminated, _, _ = venv.step([CLICK_LIST] * 4)
    assert not terminated.any()


def test_lost_worker_aborts_its_episodes_only_and_is_replaced(venv):
    venv.reset(seed=0)
    lost = venv.pool.workers[1]
    on_lost = [i for i, k in enumerate(venv.keys) if venv.pool.slot(k).worker == 1]
    lost.kill()
    _, rewards, terminated, truncated, infos = venv.step([CLICK_LIST] * 4)
    assert truncated.tolist() == [i in on_lost for i in range(4)], (on_lost, infos)
    assert infos["aborted"].tolist() == [i in on_lost for i in range(4)]
    assert all(infos["outcome"][i] == "env_invalid" for i in on_lost)
    assert not terminated.any() and rewards.tolist() == [0.0] * 4
    assert venv.pool.workers[1] is not lost and venv.pool.workers[1].alive and venv.pool.replaced == 1
    obs, _ = venv.reset(seed=0, options={"reset_mask": truncated})
    _, _, _, truncated, infos = venv.step([CLICK_LIST] * 4)
    assert not truncated.any() and not infos["aborted"].any(), infos


def test_each_workers_browser_runs_its_share_of_the_renderers_the_replacements_too(venv):
    """Two pages per worker: each browser runs as many renderer processes as its share of the
    machine's (one each on two cores, where two workers' browsers would otherwise run two each),
    read from the processes themselves; after the test above, worker 1 is a replacement."""
    venv.reset(seed=0)
    share = renderers_per_browser(2)
    assert share == max(1, min(4, os.cpu_count() or 1) // 2)
    for worker in venv.pool.workers:
        kinds = list(chromium_processes(worker.pid).values())
        assert kinds.count("renderer") == min(2, share), (worker.name, kinds)
    assert venv.pool.replaced == 1


def test_a_vector_env_given_renderers_runs_that_many_per_workers_browser(tmp_path):
    """`renderers=1` on one worker of two environments: one renderer process, where the worker's
    share of a machine of two or more cores would be two."""
    pack = write_pack(tmp_path)
    env = CloneVectorEnv(2, str(pack), "buy-item", workers=1, renderers=1, screen_cache=False)
    try:
        env.reset(seed=0)
        [worker] = env.pool.workers
        assert env.pool.renderers == 1
        assert list(chromium_processes(worker.pid).values()).count("renderer") == 1
    finally:
        env.close()
