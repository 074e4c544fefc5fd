"""Waiting for the screen to settle: the rule, on a scripted clock (no sleeping)."""

from __future__ import annotations

from devices.settle import SettlePolicy, wait_until_settled


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


def _run(frames: list[str], policy: SettlePolicy) -> tuple:
    clock = Clock()
    seen: list[float] = []

    def probe() -> str:
        seen.append(clock.t)
        return frames[min(len(seen) - 1, len(frames) - 1)]

    result = wait_until_settled(probe, policy, clock=clock.now, sleep=clock.sleep)
    return result, seen


def test_a_still_screen_settles_after_the_quiet_window():
    result, seen = _run(["a"], SettlePolicy(quiet_s=0.2, poll_s=0.05, timeout_s=2))
    assert result.settled and 0.2 <= result.waited_s < 0.26 and len(seen) >= 4


def test_an_animation_is_waited_out():
    # the screen changes for the first 6 polls (0.3 s), then holds
    frames = ["a", "b", "c", "d", "e", "f", "g"]
    result, _ = _run(frames, SettlePolicy(quiet_s=0.2, poll_s=0.05, timeout_s=2))
    assert result.settled and result.waited_s >= 0.3 + 0.2 - 1e-9


def test_a_screen_that_never_settles_is_bounded():
    clock_frames = [str(i) for i in range(1000)]
    result, _ = _run(clock_frames, SettlePolicy(quiet_s=0.2, poll_s=0.05, timeout_s=1.0))
    assert not result.settled and 1.0 <= result.waited_s < 1.1


def test_disabled_costs_nothing():
    result, seen = _run(["a"], SettlePolicy(enabled=False))
    assert result.settled and result.waited_s == 0 and seen == []
