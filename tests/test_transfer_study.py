"""The transfer study's loop, table, plot and findings at a tiny scale.

The per-profile studies here are a FAKE study runner (labelled so in its name and in the numbers
it returns): it records what the transfer study asked for and returns retention results chosen so
that relabelling breaks the plainly trained policy and not the randomised one. The real study
behind it is tested end to end in tests/test_study.py; the checkpoints are the committed ones.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from analysis.transfer import findings, row_from_retention
from realbench.study import StudyConfig
from realbench.transfer_study import CHECKPOINTS, PolicyRef, TransferConfig, TransferStudy

pytest.importorskip("matplotlib")


def _gain(mean: float, half: float) -> dict[str, Any]:
    return {"mean": mean, "ci": [mean - half, mean + half], "se": half / 1.96, "n_tasks": 6}


class FakeStudyRunner:
    """FAKE: stands in for a whole study; phone gain 0.4 everywhere except 0.0 for the plainly
    trained policy under relabelling."""

    def __init__(self) -> None:
        self.calls: list[tuple[StudyConfig, Path]] = []

    def __call__(self, config: StudyConfig, clone_store: Path) -> dict[str, Any]:
        self.calls.append((config, clone_store))
        drift = yaml.safe_load(Path(config.rig).read_text(encoding="utf-8"))["virtual"]["drift"]
        broken = drift == "relabel" and "trained-rand" not in config.agents[config.trained]
        phone = 0.0 if broken else 0.4
        return {
            "estimand": "sample",
            "n_tasks": 6,
            "retention": phone / 0.5,
            "fieller_ci": [phone / 0.5 - 0.3, phone / 0.5 + 0.3],
            "fieller_set_text": "fake",
            "gain_clone": _gain(0.5, 0.1),
            "gain_real": _gain(phone, 0.1),
        }


def test_policy_ref_reads_the_committed_checkpoints() -> None:
    for folder in ("base", "trained", "trained-rand"):
        ref = PolicyRef.of(f"policy:{CHECKPOINTS / folder}")
        assert ref.agent.startswith("policy:element@") and len(ref.agent) == len("policy:element@") + 12
        assert ref.description.startswith("a small element policy")
        assert "VLM" not in ref.description


def test_table_has_a_row_per_policy_and_profile_with_the_policies_named(tmp_path: Path) -> None:
    runner = FakeStudyRunner()
    profiles = ["none", "relabel"]
    config = TransferConfig(out=tmp_path / "transfer", profiles=profiles, study=StudyConfig(progress=False))
    report = TransferStudy(config, runner=runner).run()

    names = {PolicyRef.of(s).description for s in config.trained}
    agents = {PolicyRef.of(s).agent for s in config.trained}
    assert len(runner.calls) == 4
    # the clone store is one for every study; phone runs go to each profile's own folder
    assert {c[1] for c in runner.calls} == {tmp_path / "transfer" / "clone"}
    assert len({c[0].out for c in runner.calls}) == 4
    # the study analyses by recorded agent name and runs by checkpoint spec
    for cfg, _ in runner.calls:
        assert cfg.agents[cfg.trained].startswith("policy:") and cfg.trained in agents

    data = yaml.safe_load((tmp_path / "transfer" / "transfer.json").read_text(encoding="utf-8"))
    rows = {(r["agent"], r["profile"]) for r in data["rows"]}
    assert rows == {(a, p) for a in agents for p in profiles}
    html = report.read_text(encoding="utf-8")
    assert 'id="transfer"' in html
    for name in names:
        assert name in html
    assert "Relabelled buttons" in html  # the finding on the mechanism the fake data shows


def test_findings_name_the_mechanism_only_where_intervals_separate() -> None:
    rows = []
    for policy, spec in (("plain", "x/trained"), ("randomised", "x/trained-rand")):
        for profile in ("none", "relabel", "layout"):
            phone = 0.0 if (profile == "relabel" and policy == "plain") else 0.4
            data = {
                "n_tasks": 6,
                "gain_clone": _gain(0.5, 0.1),
                "gain_real": _gain(phone, 0.1),
                "retention": None,
            }
            rows.append(row_from_retention(policy, spec, profile, data))
    sentences = findings(rows)
    relabel_plain = [s for s in sentences if s.startswith("Relabelled") and "for plain" in s]
    assert (
        relabel_plain
        and "removed 40 points" in relabel_plain[0]
        and "within the noise" not in relabel_plain[0]
    )
    layout = [s for s in sentences if s.startswith("A shifted layout") and "for plain" in s]
    assert layout and "within the noise" in layout[0]
    assert any("randomised keeps the larger phone gain" in s for s in sentences)
