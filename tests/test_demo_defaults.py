"""The demo's defaults are one set: `realbench demo`, `StudyConfig` and docs/study.md agree, and the
device budget is the one whose headline is estimable (docs/benchmarks.md records the runs)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from realbench.cli import demo_cmd
from realbench.study import StudyConfig

ROOT = Path(__file__).resolve().parent.parent


def _cli_default(name: str) -> object:
    return inspect.signature(demo_cmd).parameters[name].default


def test_the_cli_and_the_study_share_their_defaults() -> None:
    cfg = StudyConfig()
    for name in ("budget_hours", "clone_repeats", "real_repeats", "workers", "phones"):
        assert _cli_default(name) == getattr(cfg, name), name


def test_docs_state_the_default_budget() -> None:
    budget = StudyConfig().budget_hours
    study = (ROOT / "docs" / "study.md").read_text(encoding="utf-8")
    stated = set(re.findall(r"default ([0-9.]+) device-hours", study))
    assert stated == {f"{budget:g}"}, stated


def test_make_demo_installs_only_the_package_and_no_pip_upgrade() -> None:
    """What `make demo` would run (dry run, every rule forced): the package without the test,
    cluster and training extras, and no pip self-upgrade before it."""
    import shutil
    import subprocess

    make = shutil.which("make")
    if make is None:
        import pytest

        pytest.skip("no make on this host")
    plan = subprocess.run(
        [make, "-B", "-n", "-C", str(ROOT), "demo"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    installs = [line for line in plan.splitlines() if "pip install" in line]
    assert installs and all("-e ." in line for line in installs), installs
    assert not any("dev,ray,train" in line or "--upgrade pip" in line for line in installs), installs
    assert "realbench demo" in plan


def test_the_demo_runs_the_committed_learned_policies_on_their_training_tasks() -> None:
    from realbench.cli import DemoPolicies
    from realbench.policy_refs import CHECKPOINTS, committed
    from realbench.study import learned_policies
    from realbench.taskpack import load_pack

    assert _cli_default("policies") is DemoPolicies.LEARNED
    cfg = learned_policies(StudyConfig())
    base, trained = committed("base"), committed("trained")
    assert base.card is not None and trained.card is not None
    assert cfg.base == base.agent and cfg.trained == trained.agent and cfg.base != cfg.trained
    assert cfg.agents == {
        base.agent: f"policy:{CHECKPOINTS / 'base'}",
        trained.agent: f"policy:{CHECKPOINTS / 'trained'}",
    }
    assert base.card.updates == 0 < trained.card.updates
    assert cfg.tasks == trained.card.tasks and len(cfg.tasks) >= 20
    pack = load_pack(cfg.pack)
    assert set(cfg.tasks) <= {t.id for t in pack.tasks}


def test_the_learned_demo_refuses_a_pack_its_policies_never_saw() -> None:
    import pytest

    from realbench.errors import ConfigError
    from realbench.study import learned_policies

    with pytest.raises(ConfigError, match="trained on 'train_ticketing'"):
        learned_policies(StudyConfig(pack=ROOT / "taskpacks" / "bank"))
