"""Waiting for a screen to settle after an action: real apps animate (ripples, transitions,
lists loading), and an observation taken mid-animation shows the agent a screen that is about to
change. After each action the device polls a cheap fingerprint of the screen (its UI hierarchy)
until it has stayed the same for `quiet_s`, or `timeout_s` has passed (then it observes anyway).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class SettlePolicy:
    enabled: bool = True
    quiet_s: float = 0.2  # unchanged this long counts as settled
    poll_s: float = 0.05  # pause between fingerprints (each also costs one hierarchy dump)
    timeout_s: float = 2.0  # bound: a screen that never settles (a video, a spinner) is observed anyway


@dataclass(frozen=True)
class SettleResult:
    settled: bool
    waited_s: float
    polls: int


def fingerprint(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8", errors="replace"), digest_size=16).hexdigest()


def wait_until_settled(
    probe: Callable[[], str],
    policy: SettlePolicy,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> SettleResult:
    """Poll `probe` (a screen fingerprint) until it is unchanged for `policy.quiet_s`."""
    start = clock()
    if not policy.enabled:
        return SettleResult(settled=True, waited_s=0.0, polls=0)
    last = probe()
    since = clock()
    polls = 1
    while True:
        now = clock()
        if now - since >= policy.quiet_s:
            return SettleResult(settled=True, waited_s=now - start, polls=polls)
        if now - start >= policy.timeout_s:
            return SettleResult(settled=False, waited_s=now - start, polls=polls)
        sleep(policy.poll_s)
        current = probe()
        polls += 1
        if current != last:
            last, since = current, clock()
