"""`realbench serve-model`: the vllm command line, a clear failure without vLLM, and the process
lifecycle (exercised with a stand-in `vllm` executable that runs the fake server)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from realbench.agents.fake_server import FAKE_MODEL, FakeModelServer
from realbench.agents.serve import (
    ServeConfig,
    find_vllm,
    serve_model,
    start_server,
    stop_server,
    vllm_command,
    wait_for_endpoint,
)
from realbench.cli import app
from realbench.errors import ModelError, ServerError
from tests.adb_support import free_port

REPO = Path(__file__).resolve().parents[1]


def test_vllm_command_for_qwen_vl():
    cfg = ServeConfig(
        model="/ckpt/trained", served_name="trained", port=8001, tensor_parallel=2, max_images=4, tools=True
    )
    cmd = vllm_command(cfg)
    assert cmd[:3] == ["vllm", "serve", "/ckpt/trained"]
    joined = " ".join(cmd)
    assert "--served-model-name trained" in joined and "--tensor-parallel-size 2" in joined
    assert json.loads(cmd[cmd.index("--limit-mm-per-prompt") + 1]) == {"image": 4, "video": 0}
    assert cmd[cmd.index("--generation-config") + 1] == "vllm"
    assert json.loads(cmd[cmd.index("--mm-processor-kwargs") + 1])["max_pixels"] == cfg.max_pixels
    assert "--tool-call-parser" in cmd and cfg.base_url == "http://127.0.0.1:8001/v1"


def test_missing_vllm_fails_clearly(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ModelError, match="vLLM is not installed") as info:
        find_vllm()
    assert "pip install vllm" in (info.value.hint or "")
    result = CliRunner().invoke(app, ["serve-model", "/ckpt/base"])
    assert result.exit_code != 0 and isinstance(result.exception, ModelError)


def test_cli_dry_run_and_check():
    runner = CliRunner()
    result = runner.invoke(app, ["serve-model", "/ckpt/base", "--name", "base", "--gpus", "1", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "CUDA_VISIBLE_DEVICES=1 vllm serve /ckpt/base" in result.output
    with FakeModelServer(["x"]) as server:
        result = runner.invoke(app, ["serve-model", "--check", server.base_url])
    assert result.exit_code == 0 and FAKE_MODEL in result.output
    with pytest.raises(ServerError):
        wait_for_endpoint(server.base_url, timeout_s=0.3, poll_s=0.1)


def _stand_in_vllm(bin_dir: Path, body: str) -> None:
    """A `vllm` executable that is really the fake server (or a crash), for lifecycle tests."""
    bin_dir.mkdir()
    exe = bin_dir / "vllm"
    exe.write_text(f'#!/bin/sh\nif [ "$1" = "--version" ]; then echo 0.11.2; exit 0; fi\n{body}\n')
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)


def test_server_lifecycle_with_a_stand_in(tmp_path, monkeypatch):
    port = free_port()
    record = tmp_path / "env.txt"
    _stand_in_vllm(
        tmp_path / "bin",
        f'echo "key=${{VLLM_API_KEY:+set}} args=$*" > {record}\n'
        f"exec {sys.executable} -m realbench.agents.fake_server --port {port} --model trained",
    )
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    monkeypatch.setenv("RB_SERVE_KEY", "sk-serve-secret-123")
    cfg = ServeConfig(model="/ckpt/trained", served_name="trained", port=port, api_key_env="RB_SERVE_KEY")
    log_path = tmp_path / "vllm.log"
    process = start_server(cfg, log_path=log_path)
    try:
        assert wait_for_endpoint(cfg.base_url, timeout_s=30, process=process, poll_s=0.2) == ["trained"]
        written = record.read_text()
        assert "key=set" in written and "sk-serve-secret-123" not in written  # the key travels by environment
        assert "--served-model-name trained" in written
    finally:
        stop_server(process, timeout_s=10)
    assert process.poll() is not None


def test_server_that_dies_reports_its_log(tmp_path, monkeypatch):
    _stand_in_vllm(tmp_path / "bin", 'echo "torch.OutOfMemoryError: CUDA out of memory"; exit 3')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    cfg = ServeConfig(model="/ckpt/huge", port=free_port())
    with pytest.raises(ServerError, match="CUDA out of memory"):
        serve_model(cfg, log_path=tmp_path / "vllm.log", ready_timeout_s=20, foreground=False)


@pytest.mark.gpu
def test_vllm_smoke_on_a_gpu(tmp_path):
    if shutil.which("nvidia-smi") is None:
        pytest.skip("needs an NVIDIA GPU (nvidia-smi not found)")
    if shutil.which("vllm") is None:
        pytest.skip("needs vLLM installed (`pip install vllm`), which only installs on CUDA machines")
    import subprocess

    out = subprocess.run(
        ["bash", str(REPO / "benchmarks" / "vllm_smoke.sh"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "agent steps" in out.stdout and "judge calls" in out.stdout


def test_smoke_driver_runs_against_the_fake_server():
    """The GPU smoke script's driver, pointed at the fake server, so it cannot rot unnoticed."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("vllm_smoke", REPO / "benchmarks" / "vllm_smoke.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with FakeModelServer(
        ['{"success": true, "reason": "ok", "confidence": 0.5}'], repeat_last=True
    ) as server:
        report = module.drive(
            server.base_url, FAKE_MODEL, steps=2, concurrency=2, judge_calls=2, fmt="qwen-mobile"
        )
    assert server.problems == []
    assert report["agent"]["agent steps"] == 4 and report["agent"]["format_errors"] == 4
    assert report["agent"]["prompt_tokens"] > 0 and report["judge"]["judge calls"] == 2
    assert report["judge"]["abstained"] == 0


def _dry_run_command(*args: str) -> list[str]:
    import shlex

    result = CliRunner().invoke(app, ["serve-model", "/ckpt/base", "--dry-run", *args])
    assert result.exit_code == 0, result.output
    return shlex.split(result.output.strip())


def test_server_limits_follow_the_clients_image_policy():
    from realbench.agents.formats import get_format
    from realbench.agents.images import target_size

    # Qwen3-VL: the processor's `size` form, with the client's 32-px policy
    cmd = _dry_run_command("--format", "qwen3-mobile")
    policy = get_format("qwen3-mobile").image_policy()
    kwargs = json.loads(cmd[cmd.index("--mm-processor-kwargs") + 1])
    assert kwargs == {"size": {"longest_edge": policy.max_pixels, "shortest_edge": policy.min_pixels}}
    # UI-TARS-1.5: its own budget, and its 5-screenshot window
    cmd = _dry_run_command("--format", "ui-tars")
    kwargs = json.loads(cmd[cmd.index("--mm-processor-kwargs") + 1])
    assert kwargs == {"max_pixels": 16384 * 28 * 28, "min_pixels": 100 * 28 * 28}
    assert json.loads(cmd[cmd.index("--limit-mm-per-prompt") + 1]) == {"image": 5, "video": 0}
    # whatever the client sends under its policy is already within the server's limits: the
    # server has nothing left to shrink
    for w, h in [(1080, 2400), (1440, 3200), (720, 1600)]:
        size = target_size(w, h, get_format("ui-tars").image_policy())
        assert size.width * size.height <= kwargs["max_pixels"]
    cmd = _dry_run_command("--format", "qwen-mobile", "--max-pixels", "401408", "--max-tokens", "256")
    assert json.loads(cmd[cmd.index("--mm-processor-kwargs") + 1])["max_pixels"] == 401408
    assert json.loads(cmd[cmd.index("--override-generation-config") + 1]) == {"max_new_tokens": 256}


def test_too_old_vllm_is_refused(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "vllm"
    exe.write_text('#!/bin/sh\nif [ "$1" = "--version" ]; then echo 0.8.5; exit 0; fi\nexit 3\n')
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(ModelError, match="older than 0.11.0"):
        start_server(ServeConfig(model="/ckpt/x"), log_path=tmp_path / "log")


def test_run_options_shape_the_agent():
    from realbench.agents import make_agent

    agent = make_agent(
        "openai",
        base_url="http://127.0.0.1:9/v1",
        model="m",
        fmt="ui-tars",
        max_pixels=500_000,
        history_images=2,
        temperature=0.7,
        max_tokens=99,
    )
    settings = agent.settings()  # type: ignore[attr-defined]
    assert settings["images"]["max_pixels"] == 500_000 and settings["image_window"] == 2
    assert settings["generation"]["temperature"] == 0.7 and settings["generation"]["max_tokens"] == 99
    other = make_agent("openai", base_url="http://127.0.0.1:9/v1", model="m", fmt="ui-tars")
    assert other.prompt_hash != agent.prompt_hash  # type: ignore[attr-defined]
