"""The committed element-policy checkpoints are reproducible from the `realbench train` command each
records (only its output folder changed).

A short card is rerun whole and must give its weights byte for byte. A long one (hundreds of
updates, a CPU-hour or more) is rerun for its first `PREFIX_UPDATES` updates: a run's first N updates
make the same draws as a run of N updates (only --updates and --eval-every differ, and evaluation
draws nothing), so the rerun must reach the weights the card's own curve recorded after update N;
and the curve's last point must be the card's weights. The whole rerun is `make checkpoints`
(benchmarks/checkpoints_rerun.py).

Bit-reproducibility holds on the CPU model the card names (`cpu`): another model's float arithmetic
sends the sampled rollouts elsewhere within a few updates (docs/rl.md), so there the rerun is skipped,
saying so. What does not depend on the CPU is checked everywhere: the command describes the card (its
pack, tasks, updates, seed and drift), the curve ends at the card's weights, and the committed
weights, played greedily, score on the training and held-out tasks what the curve's last point says."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

pytest.importorskip("torch")

from typer.testing import CliRunner  # noqa: E402

from devices.rl.policy_train import CURVE_JSON, Roller, evaluate, pick_tasks  # noqa: E402
from realbench.agents.policy_net import load_checkpoint  # noqa: E402
from realbench.cli import app  # noqa: E402
from realbench.machine import cpu_model  # noqa: E402
from realbench.taskpack import load_pack  # noqa: E402
from tests.policy_support import config_of_command  # noqa: E402

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
CHECKPOINTS = ROOT / "checkpoints"
CARDS = sorted(p.parent for p in CHECKPOINTS.glob("*/*/policy.json"))
WHOLE_UPDATES = 16  # cards up to this many updates are rerun whole
PREFIX_UPDATES = 6


def _set(args: list[str], option: str, value: str) -> None:
    args[args.index(option) + 1] = value


def _rerun(command: str, out: Path, updates: int | None = None) -> None:
    args = shlex.split(command)
    assert args[:2] == ["realbench", "train"], command
    args = args[1:]  # the `train` subcommand and its options
    _set(args, "--out", str(out))
    if updates is not None:
        _set(args, "--updates", str(updates))
        _set(args, "--eval-every", str(updates))
    result = CliRunner().invoke(app, [*args, "--no-progress"])
    assert result.exit_code == 0, result.output


def _points(folder: Path) -> list[dict[str, object]]:
    return list(json.loads((folder / CURVE_JSON).read_text(encoding="utf-8"))["points"])


def _curve(folder: Path) -> dict[int, str | None]:
    return {int(str(p["update"])): p.get("weights_sha256") for p in _points(folder)}  # type: ignore[misc]


@pytest.mark.timeout(600)
@pytest.mark.parametrize("folder", CARDS, ids=[str(c.relative_to(CHECKPOINTS)) for c in CARDS])
def test_the_card_is_what_its_command_and_curve_say(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    params, card = load_checkpoint(folder)
    cfg = config_of_command(card.command, monkeypatch)
    assert (cfg.pack, cfg.tasks, cfg.updates, cfg.seed, cfg.drift_randomise) == (
        card.pack,
        card.tasks,
        card.updates,
        card.seed,
        card.drift_randomise,
    )
    last = _points(folder)[-1]
    assert last["update"] == card.updates and last["weights_sha256"] == card.weights_sha256
    pack = load_pack(ROOT / "taskpacks" / cfg.pack)
    roller = Roller(pack, cfg)
    on_train = evaluate(roller, params, pick_tasks(pack, cfg.tasks))
    assert sum(on_train.values()) / len(on_train) == pytest.approx(last["train_success"])
    if cfg.heldout:
        on_heldout = evaluate(roller, params, pick_tasks(pack, cfg.heldout))
        assert sum(on_heldout.values()) / len(on_heldout) == pytest.approx(last["heldout_success"])


def test_there_are_committed_checkpoints() -> None:
    assert len(CARDS) >= 3, CARDS


@pytest.mark.timeout(900)
@pytest.mark.parametrize("folder", CARDS, ids=[str(c.relative_to(CHECKPOINTS)) for c in CARDS])
def test_checkpoint_reproduces_from_its_command(folder: Path, tmp_path: Path) -> None:
    _, card = load_checkpoint(folder)  # also checks the weights against the card's hash
    if card.updates and card.cpu != cpu_model():
        pytest.skip(
            f"trained on {card.cpu or 'an unrecorded CPU'}; this is {cpu_model()}: bit for bit only there"
        )
    if card.updates <= WHOLE_UPDATES:
        _rerun(card.command, tmp_path / "again")
        _, again = load_checkpoint(tmp_path / "again")
        assert again.weights_sha256 == card.weights_sha256
        assert again.description == card.description
        return
    curve = _curve(folder)
    assert curve[card.updates] == card.weights_sha256  # the card is where its curve ends
    _rerun(card.command, tmp_path / "again", PREFIX_UPDATES)
    _, again = load_checkpoint(tmp_path / "again")
    assert curve[PREFIX_UPDATES] is not None
    assert again.weights_sha256 == curve[PREFIX_UPDATES]
