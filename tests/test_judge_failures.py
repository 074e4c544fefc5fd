"""`realbench judge` against a dead or refusing endpoint, and on a damaged store."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from realbench.agents.fake_server import FAKE_MODEL, FakeModelServer, Reply
from realbench.episode import EndReason, EpisodeResult, StepRecord
from realbench.errors import ModelError
from realbench.judge.judge_run import judge_run
from realbench.observation import ImageFormat
from realbench.outcome import Outcome
from realbench.store import EpisodeKey, RunStore
from tests.test_judge import OK, PACK, _png

ROOT = Path(__file__).resolve().parent.parent


def _store(tmp_path: Path, n: int = 2) -> tuple[Path, list[str]]:
    pack_dir = tmp_path / "pack"
    pack_dir.mkdir()
    raw = PACK.model_dump(mode="json", exclude_none=True)
    (pack_dir / "pack.yaml").write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    store_dir = tmp_path / "run"
    ids = []
    with RunStore(store_dir, writer="test") as store:
        store.ensure_run("r", pack="tt", app="tt", agent="a", target="real", config={"pack": str(pack_dir)})
        for i in range(n):
            result = EpisodeResult(
                task_id="toggle", seed=i, instruction="x", params={}, agent="a", target="real", device={},
                outcome=Outcome.FAILURE, end_reason=EndReason.TERMINATE,
                steps=[StepRecord(index=0, action={"type": "terminate", "status": "success"},
                                  screenshot=_png((1, 2, 3)), image_format=ImageFormat.PNG, width=108, height=240)],
                final_screenshot=_png((0, 0, 0)), final_image_format=ImageFormat.PNG,
            )  # fmt: skip
            ids.append(store.write_episode("r", EpisodeKey("toggle", i, i), 0, "tt", result))
    return store_dir, ids


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def _judge_verdicts(store_dir: Path, ids: list[str]) -> list[str]:
    with RunStore(store_dir, create=False) as store:
        return [v.name for e in ids for v in store.verdicts(e) if v.source.value == "judge"]


@pytest.mark.parametrize("endpoint", ["dead", "401"])
def test_a_failing_endpoint_exits_non_zero_and_records_and_caches_nothing(tmp_path, endpoint):
    store_dir, ids = _store(tmp_path)
    if endpoint == "dead":
        with pytest.raises(ModelError, match="every request"):
            judge_run(store_dir, [f"q={_dead_url()},{FAKE_MODEL}"], timeout_s=2)
    else:
        with (
            FakeModelServer([Reply.error(401)], repeat_last=True) as server,
            pytest.raises(ModelError, match="every request"),
        ):
            judge_run(store_dir, [f"q={server.base_url},{FAKE_MODEL}"])
    assert _judge_verdicts(store_dir, ids) == []
    assert not list((store_dir / "judge_cache").rglob("*.json"))
    assert json.loads((store_dir / "judge_summary.json").read_text())["endpoint_failures"] == {"q": 2}
    # the endpoint comes back: the episodes are judged this time (nothing stale was cached)
    with FakeModelServer([OK], repeat_last=True) as server:
        out = judge_run(store_dir, [f"q={server.base_url},{FAKE_MODEL}"])
    assert out["judges"]["q"]["success"] == 2 and _judge_verdicts(store_dir, ids) == ["q", "q"]


def test_a_failing_endpoint_does_not_replace_an_earlier_verdict(tmp_path):
    store_dir, ids = _store(tmp_path, n=1)
    with FakeModelServer([OK], repeat_last=True) as server:
        judge_run(store_dir, [f"q={server.base_url},{FAKE_MODEL}"], use_cache=False)
    with FakeModelServer([Reply.error(401)], repeat_last=True) as server, pytest.raises(ModelError):
        judge_run(store_dir, [f"q={server.base_url},{FAKE_MODEL}"], use_cache=False)
    with RunStore(store_dir, create=False) as store:
        (verdict,) = [v for v in store.verdicts(ids[0]) if v.name == "q"]
    assert verdict.success and not verdict.abstained


def test_judge_cli_exit_code_and_damaged_store(tmp_path):
    store_dir, ids = _store(tmp_path, n=3)
    with RunStore(store_dir, create=False) as store:
        shutil.rmtree(store.episode_dir(ids[0]))
        (store.episode_dir(ids[1]) / "steps.jsonl").write_text("garbage{\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "realbench", "judge", str(store_dir), "--judge"]
    dead = subprocess.run([*cmd, f"q={_dead_url()},{FAKE_MODEL}"], capture_output=True,
                          text=True, env=env, timeout=120)  # fmt: skip
    assert dead.returncode != 0 and "Traceback" not in dead.stderr, dead.stderr
    assert "no model endpoint answers" in dead.stderr  # found before the first episode
    with FakeModelServer([OK], repeat_last=True) as server:
        good = subprocess.run([*cmd, f"q={server.base_url},{FAKE_MODEL}"], capture_output=True, text=True,
                              env=env, timeout=120)  # fmt: skip
    assert good.returncode == 0, good.stderr
    assert "Traceback" not in good.stderr and "2 damaged episode(s)" in good.stderr
    assert _judge_verdicts(store_dir, ids) == ["q"]  # only the intact episode
