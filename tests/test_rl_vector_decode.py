"""A vector environment decodes a screenshot only when its bytes are new for that environment: a
step that leaves the screen as it was brings the same bytes again, and their pixels are the ones
decoded before. Driven by a scripted pool (no browser): each step's bytes are chosen here."""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np
import pytest

from devices.rl import transitions
from devices.rl.config import EnvConfig
from devices.rl.transitions import EnvObservation, Transition
from devices.rl.vector import CloneVectorEnv
from realbench.observation import ImageFormat

H, W = 995, 448


def jpeg(seed: int) -> bytes:
    """A JPEG of noise: every seed decodes to other pixels."""
    pixels = np.random.default_rng(seed).integers(0, 256, (H, W, 3), dtype=np.uint8)
    ok, data = cv2.imencode(".jpg", pixels, [cv2.IMWRITE_JPEG_QUALITY, 80])
    assert ok
    return data.tobytes()


_DECODE = transitions.decode_jpeg_rgb  # the decoder itself, not the count the tests put around it


def decoded(data: bytes) -> np.ndarray:
    pixels = _DECODE(data)
    assert pixels is not None
    return pixels


class ScriptedPool:
    """An `EnvPool` stand-in whose resets and steps answer with the next screenshots of `script`."""

    def __init__(self) -> None:
        self.script: list[list[tuple[bytes, str]]] = []
        self.closed = False

    def create(self, configs: list[EnvConfig]) -> list[int]:
        return list(range(len(configs)))

    def _next(self, keys: list[int]) -> list[Transition]:
        shots = self.script.pop(0)
        return [
            Transition(EnvObservation(image, ImageFormat.JPEG, W, H, hierarchy), info={"step": 0})
            for image, hierarchy in (shots[k] for k in keys)
        ]

    def reset(self, items: list[tuple[int, Any, Any]]) -> list[Transition]:
        return self._next([k for k, *_ in items])

    def step(self, items: list[tuple[int, Any]]) -> list[Transition]:
        return self._next([k for k, _ in items])

    def close_envs(self, keys: list[int]) -> list[int]:
        return keys

    def close(self) -> None:
        self.closed = True


@pytest.fixture()
def counted(monkeypatch):
    """The number of JPEG decodes, counted where every decode goes through."""
    calls = {"n": 0}

    def counting(data: bytes) -> np.ndarray | None:
        calls["n"] += 1
        return _DECODE(data)

    monkeypatch.setattr(transitions, "decode_jpeg_rgb", counting)
    return calls


def test_the_same_bytes_again_are_not_decoded_again_and_new_bytes_are(counted):
    a, b, c = jpeg(1), jpeg(2), jpeg(3)
    pool = ScriptedPool()
    pool.script = [
        [(a, "<a/>"), (b, "<b/>")],  # reset
        [(a, "<a/>"), (c, "<c/>")],  # env 0 unchanged, env 1 changed
        [(bytes(a), "<a2/>"), (c, "<c/>")],  # equal bytes in another object; a new hierarchy
        [(b, "<b/>"), (c, "<c/>")],  # env 0 changed after unchanged steps
    ]
    venv = CloneVectorEnv(2, config=EnvConfig(pack="toy"), pool=pool)  # type: ignore[arg-type]
    obs, _ = venv.reset()
    assert counted["n"] == 2
    expected = [(a, c), (a, c), (b, c)]
    hierarchies = [("<a/>", "<c/>"), ("<a2/>", "<c/>"), ("<b/>", "<c/>")]
    decodes = [1, 0, 1]
    for want, tree, more in zip(expected, hierarchies, decodes, strict=True):
        before = counted["n"]
        obs, *_ = venv.step(["{}", "{}"])
        assert counted["n"] - before == more
        for i in range(2):
            np.testing.assert_array_equal(obs["screenshot"][i], decoded(want[i]))
        assert obs["hierarchy"] == tree
    venv.close()


def test_a_caller_that_writes_into_a_batch_does_not_change_later_observations(counted):
    a = jpeg(4)
    pool = ScriptedPool()
    pool.script = [[(a, "<a/>")]] * 4
    venv = CloneVectorEnv(1, config=EnvConfig(pack="toy"), pool=pool)  # type: ignore[arg-type]
    obs, _ = venv.reset()
    for _ in range(3):
        obs["screenshot"][:] = 0  # the caller's own arrays, to do with as it likes
        obs, *_ = venv.step(["{}"])
        np.testing.assert_array_equal(obs["screenshot"][0], decoded(a))
    assert counted["n"] == 1
    venv.close()


def test_encoded_observations_are_handed_out_as_they_came():
    a, b = jpeg(5), jpeg(6)
    pool = ScriptedPool()
    pool.script = [[(a, "<a/>")], [(a, "<a/>")], [(b, "<b/>")]]
    venv = CloneVectorEnv(1, config=EnvConfig(pack="toy", image="jpeg"), pool=pool)  # type: ignore[arg-type]
    obs, _ = venv.reset()
    for want in (a, b):
        obs, *_ = venv.step(["{}"])
        assert obs["screenshot"][0].tobytes() == want
    venv.close()
