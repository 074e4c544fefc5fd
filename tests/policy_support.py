"""The `realbench train` command line as the CLI reads it, for the tests of element-policy cards."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

import devices.rl.policy_train as policy_train
from realbench.cli import app


def config_of_command(command: str, monkeypatch: pytest.MonkeyPatch) -> policy_train.TrainConfig:
    """The TrainConfig the CLI builds from a `realbench train ...` command line; training is not run
    (the stand-in for `train` records the configuration and ends the command)."""
    seen: list[policy_train.TrainConfig] = []

    def record(config: policy_train.TrainConfig, out: Path, **_: object) -> None:
        seen.append(config)
        raise SystemExit(0)

    args = shlex.split(command)
    assert args[:2] == ["realbench", "train"], command
    with monkeypatch.context() as m:
        m.setattr(policy_train, "train", record)
        result = CliRunner().invoke(app, args[1:])
    assert result.exit_code == 0, result.output
    assert len(seen) == 1, result.output
    return seen[0]
