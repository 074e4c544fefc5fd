"""The committed untrained element-policy checkpoint is reproducible: rerunning the exact
`realbench train` command it records (only its output folder changed) gives the same weights, byte
for byte."""

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


# Only the untrained base is checked: two runs of a trained checkpoint's command agree through
# update 5 and then drift apart (float-level differences in the update compound), so trained
# weights are not bit-reproducible yet (checkpoints/README.md). A test that could only be expected
# to fail would prove nothing and cost two minutes of CI.
@pytest.mark.parametrize("name", ["base"])
def test_checkpoint_reproduces_from_its_command(name: str, tmp_path: Path) -> None:
    _, card = load_checkpoint(CHECKPOINTS / name)
    _rerun(card.command, tmp_path / name)
    _, again = load_checkpoint(tmp_path / name)
    assert again.weights_sha256 == card.weights_sha256
    assert again.description == card.description
