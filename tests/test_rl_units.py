"""Fast checks of the RL layer's plain parts: spaces, configuration, wire formats, error transport."""

from __future__ import annotations

import io

import gymnasium as gym
import numpy as np
import pytest
from PIL import Image

import devices.rl
from devices.rl.config import EnvConfig, ImageMode, resolve_pack
from devices.rl.core import outcome_for, parse_policy_action
from devices.rl.errors import EnvNotFound, ErrorInfo, SnapshotMismatch, WorkerLost, http_status
from devices.rl.service import env_config_from
from devices.rl.spaces import action_space, observation_space, screen_size
from devices.rl.transitions import EnvObservation, Transition
from devices.rl.workers import import_modules
from realbench.actions import Click
from realbench.errors import ActionError, ConfigError, DeviceLost, UnknownNameError
from realbench.observation import ImageFormat
from realbench.outcome import EndReason, Outcome, Verdict


def test_gymnasium_ids_are_registered():
    for env_id in ("realbench/train_ticketing-v1", "realbench/bank-v1", "realbench/clone-v1"):
        assert env_id in gym.registry
    assert gym.registry["realbench/bank-v1"].kwargs == {"pack": "bank"}
    assert gym.registry["realbench/bank-v1"].entry_point == devices.rl.ENTRY_POINT


def test_action_space_holds_action_json_with_chinese_text():
    space = action_space()
    assert space.contains('{"type": "type", "text": "北京南"}')
    assert not space.contains(b"bytes are not text")
    assert isinstance(parse_policy_action('{"type": "type", "text": "北京南"}'), object)
    assert parse_policy_action({"type": "click", "x": 1, "y": 2}) == Click(x=1, y=2)
    with pytest.raises(ActionError, match="type"):
        parse_policy_action('{"type": "tap"}')


def test_observation_space_follows_the_configuration():
    cfg = EnvConfig(pack="p", short_side=448)
    space = observation_space(cfg)
    assert space["screenshot"].shape == (995, 448, 3) and screen_size(cfg) == (448, 995)
    assert set(space) == {"screenshot", "hierarchy"}
    encoded = observation_space(EnvConfig(pack="p", image="png", hierarchy=False))
    assert set(encoded) == {"screenshot"} and isinstance(encoded["screenshot"], gym.spaces.Sequence)
    assert ImageMode.PNG.wire_format == "png" and ImageMode.ARRAY.wire_format == "jpeg"


def test_config_is_validated_and_packs_resolve(tmp_path):
    with pytest.raises(ValueError):
        EnvConfig(pack="p", short_side=10)
    with pytest.raises(ValueError):
        EnvConfig(pack="p", reward={"format_error_penalty": -1})
    with pytest.raises(ConfigError, match="no task pack"):
        resolve_pack(tmp_path / "missing")
    (tmp_path / "pack.yaml").write_text("x: 1")
    assert resolve_pack(tmp_path) == tmp_path.resolve()
    config, count = env_config_from({"env": "realbench/bank-v1", "count": 3, "task_id": "t1"})
    assert (config.pack, config.task_id, count) == ("bank", "t1", 3)
    with pytest.raises(ConfigError, match="count"):
        env_config_from({"pack": "p", "count": 0})
    with pytest.raises(ConfigError, match="unknown env"):
        env_config_from({"env": "realbench/nope-v1"})


def test_errors_cross_process_boundaries_as_their_own_class():
    for exc in (
        EnvNotFound("gone", hint="create one"),
        SnapshotMismatch("other clone"),
        WorkerLost("dead"),
        UnknownNameError("clone", "x", ["a"]),
    ):
        back = ErrorInfo.of(exc).to_exception()
        assert type(back) is type(exc) and back.message == exc.message and back.hint == exc.hint
    assert isinstance(ErrorInfo("NoSuchError", "m").to_exception(), Exception)
    assert isinstance(WorkerLost("x"), DeviceLost)
    assert http_status(EnvNotFound("x")) == 404 and http_status(ConfigError("x")) == 400


def test_transitions_round_trip_through_json():
    buf = io.BytesIO()
    Image.new("RGB", (4, 3), (10, 20, 30)).save(buf, format="PNG")
    obs = EnvObservation(buf.getvalue(), ImageFormat.PNG, 4, 3, "<hierarchy/>")
    t = Transition(obs, reward=1.0, terminated=True, info={"outcome": "success"})
    back = Transition.from_json(t.to_json())
    assert back == t and back.done
    assert back.observation.pixels().shape == (3, 4, 3) and back.observation.pixels()[0, 0].tolist() == [
        10,
        20,
        30,
    ]
    assert Transition.from_json(t.to_json(hierarchy=False)).observation.hierarchy is None
    assert np.frombuffer(back.observation.image, np.uint8)[:4].tolist() == [0x89, 0x50, 0x4E, 0x47]


def test_outcomes_match_the_episode_loop():
    ok, bad = Verdict.ok(), Verdict.fail("no")
    assert outcome_for(EndReason.BOUNDARY, ok) is Outcome.SUCCESS
    assert outcome_for(EndReason.STEP_BUDGET, bad) is Outcome.STEP_BUDGET
    assert outcome_for(EndReason.FORMAT_ERRORS, bad) is Outcome.FORMAT_ERROR
    assert outcome_for(EndReason.TERMINATE, bad) is Outcome.FAILURE
    assert outcome_for(EndReason.ABORT, ok) is Outcome.ENV_INVALID


def test_worker_imports_can_call_a_registration_function():
    import_modules(("json", "tests.rl_support"))
    with pytest.raises(AttributeError):
        import_modules(("json:no_such_function",))


def test_a_worker_that_cannot_start_says_why():
    from devices.rl.workers import ProcessWorker
    from realbench.errors import ServerError

    worker = ProcessWorker("bad", imports=("no_such_module_here",))
    with pytest.raises(ServerError, match="no_such_module_here"):
        worker.wait_ready(60)
    assert not worker.alive
