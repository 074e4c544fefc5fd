"""The fault-injection suite: 200 episodes on virtual phones while connections drop, the
on-device server dies, screenshots go black or slow, apps log out or drift in version, and the
runner itself is SIGKILLed mid-run and resumed. Nothing may be lost, done twice or mis-scored."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.farm]

ROOT = Path(__file__).resolve().parents[1]


def load_benchmark():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("farm_faults", ROOT / "benchmarks" / "farm_faults.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["farm_faults"] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(420)
def test_two_hundred_episodes_under_faults(tmp_path: Path) -> None:
    bench = load_benchmark()
    f = bench.run_fault_suite(episodes=200, phones=4, seed=7, steps=0, fault_period_s=0.4, workdir=tmp_path)
    assert f["planned"] >= 200
    assert f["runner_sigkilled"], "the runner finished before it could be killed"
    assert 0 < f["stored_when_killed"] < f["planned"]
    assert f["faults_injected"] >= 50 and len(f["faults_by_kind"]) >= 5
    assert f["env_invalid_attempts"] > 0, "no fault ever cost an attempt: the suite tested nothing"
    assert f["lost"] == 0
    assert f["done_twice"] == 0
    assert f["misscored"] == 0, "a fault leaked into a scored outcome"
    assert f["aborts_unexplained"] == 0
    assert f["finished_scored"] + f["gave_up"] == f["planned"]
    assert f["third_run_new_attempts"] == 0, "a finished run must resume to nothing"
    assert f["device_kinds"] == ["virtual-phone"]
    assert f["exit_codes"][1:] == [0, 0]
