"""The committed element-policy checkpoints are reproducible: rerunning the exact `realbench train`
command each records (only its output folder changed) gives the same weights, byte for byte."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

pytest.importorskip("torch")

from typer.testing import CliRunner  # noqa: E402

from realbench.agents.policy_net import load_checkpoint  # noqa: E402
from realbench.cli import app  # noqa: E402

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
CHECKPOINTS = ROOT / "checkpoints" / "train_ticketing"


def _rerun(command: str, out: Path) -> None:
    args = shlex.split(command)
    assert args[:2] == ["realbench", "train"], command
    args = args[1:]  # the `train` subcommand and its options
    args[args.index("--out") + 1] = str(out)
    result = CliRunner().invoke(app, [*args, "--no-progress"])
    assert result.exit_code == 0, result.output


# Training is bit-reproducible (devices/rl/policy_train.py: one seeded generator, torch on one thread
# with deterministic kernels), so the trained checkpoints are checked as well as the untrained base.
# Each trained one is 288 browser-free episodes: about a CPU-minute and a half.
@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", ["base", "trained", "trained-rand"])
def test_checkpoint_reproduces_from_its_command(name: str, tmp_path: Path) -> None:
    _, card = load_checkpoint(CHECKPOINTS / name)
    _rerun(card.command, tmp_path / name)
    _, again = load_checkpoint(tmp_path / name)
    assert again.weights_sha256 == card.weights_sha256
    assert again.description == card.description
