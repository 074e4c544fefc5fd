"""The judge audit's estimators against the design that drew the labels, on hand-computed tables."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis.audit import audit_table
from analysis.labelling import plan_labels
from tests.adversarial_tables import audit_rows, crowded_task_table, verdict_sampled_table
from tests.analysis_fixtures import TRAINED


def test_the_plan_draws_a_simple_random_sample_whose_ppv_is_unbiased():
    df, hidden = crowded_task_table()
    ppvs = []
    for seed in range(120):
        plan = plan_labels(df, 12, seed=seed)
        pos = [e for e in plan.episodes if df.set_index("episode").loc[e.episode, "verdict"]]
        assert pos, "the judge-positive stratum always gets labels"
        ppvs.append(np.mean([hidden[e.episode] for e in pos]))
        # Every planned episode of a stratum carries the same inclusion probability n_h / N_h.
        by_stratum: dict[str, set[float]] = {}
        for e in plan.episodes:
            by_stratum.setdefault(e.stratum, set()).add(e.inclusion_probability)
        for s in plan.strata:
            (pi,) = by_stratum[s.id]
            assert pi == pytest.approx(s.allocated / s.unlabelled)
    # The truth is 20/25 = 0.8. Spreading the labels over tasks first gives about 1/6: one label
    # from task A and one false accept from each B task.
    assert abs(float(np.mean(ppvs)) - 0.8) < 0.05, np.mean(ppvs)
    assert plan.to_dict()["design"].startswith("simple random sample")


def test_verdict_sampled_rates_are_weighted_by_the_strata():
    res = audit_table(verdict_sampled_table(), sampled_by_verdict=True, seed=0)
    (j,) = res.judges
    m = j.metrics
    assert m.se.value == pytest.approx(0.8)
    assert m.sp.value == pytest.approx(0.7)
    assert m.fnr.value == pytest.approx(0.2)
    assert m.fpr.value == pytest.approx(0.3)
    assert m.ppv.value == pytest.approx(0.8)
    assert m.npv.value == pytest.approx(0.7)
    # The raw counts stay what was labelled.
    assert (m.confusion.tp, m.confusion.fn, m.confusion.tn, m.confusion.fp) == (8, 3, 7, 2)
    (c,) = j.corrected
    assert c.method == "double-sampling"
    assert c.corrected_rate == pytest.approx(0.6)
    assert c.se_used == pytest.approx(0.8) and c.sp_used == pytest.approx(0.7)
    assert c.true_rate_labelled == pytest.approx(11 / 20)  # unweighted: labelled as such
    unweighted = audit_table(verdict_sampled_table(), sampled_by_verdict=False, seed=0).judges[0].metrics
    assert unweighted.se.value == pytest.approx(8 / 11)


def test_double_sampling_variance_has_the_finite_population_correction():
    from analysis.stats import double_sampling_variance

    full = double_sampling_variance(0.6, 0.8, 0.7, 100, 10, 10)
    fpc = double_sampling_variance(0.6, 0.8, 0.7, 100, 10, 10, fpc_pos=1 - 10 / 60, fpc_neg=1 - 10 / 40)
    by_hand = 0.5**2 * 0.24 / 100 + 0.36 * 0.16 * (50 / 60) / 10 + 0.16 * 0.21 * (30 / 40) / 10
    assert fpc == pytest.approx(by_hand)
    assert fpc < full
    # Every judged episode labelled: the PPV and NPV terms vanish.
    assert double_sampling_variance(0.6, 0.8, 0.7, 100, 60, 40, fpc_pos=0.0, fpc_neg=0.0) == pytest.approx(
        0.5**2 * 0.24 / 100
    )


def _two_sided(device_negatives_labelled: bool) -> pd.DataFrame:
    cells: list[tuple[str, str, bool | None, bool, int]] = []
    # Clone: fully labelled by its verifier; the judge's NPV there is 0.9.
    cells += [(f"c{i}", "clone", True, True, 1) for i in range(20)]
    cells += [(f"c{i}", "clone", i == 20, False, 1) for i in range(20, 30)]
    # Device: 30 judge-positives (6 labelled, 3 true), 20 judge-negatives.
    cells += [(f"d{i}", "real", (i < 3) if i < 6 else None, True, 1) for i in range(30)]
    cells += [
        (f"d{i}", "real", (False if device_negatives_labelled and i < 34 else None), False, 1)
        for i in range(30, 50)
    ]
    return audit_rows(cells)


def test_a_verdict_stratum_without_labels_is_not_borrowed_from_the_clone():
    res = audit_table(_two_sided(False), sampled_by_verdict=True, seed=0)
    real = next(c for c in res.judges[0].corrected if c.side == "real")
    assert not real.estimable and real.corrected_rate is None
    assert "NPV is not identified" in real.note
    q, ppv = 0.6, 0.5
    assert real.bounds == (pytest.approx(q * ppv), pytest.approx(q * ppv + 1 - q))
    d = real.to_dict()
    assert d["estimable"] is False and d["reason"]
    assert any("not estimable" in w and "real" in w for w in res.warnings)
    # Asked for, the clone's NPV stands in, and the result says so.
    asked = audit_table(_two_sided(False), sampled_by_verdict=True, seed=0, borrow_from="clone")
    real = next(c for c in asked.judges[0].corrected if c.side == "real")
    assert real.corrected_rate == pytest.approx(0.6 * 0.5 + 0.4 * 0.1)
    assert "borrowed from clone" in real.note
    assert any("borrowed" in w for w in asked.warnings)


def test_labels_in_both_strata_are_used_whatever_their_truths_say():
    # Every labelled device episode is a success, in both verdict strata: p̂ = PPV·q + (1 − NPV)(1 − q)
    # = 1·q + 1·(1 − q) = 1 from the device's own labels, not a clone/device mixture.
    cells: list[tuple[str, str, bool | None, bool, int]] = []
    cells += [(f"c{i}", "clone", i % 2 == 0, i % 3 == 0, 1) for i in range(30)]
    cells += [(f"d{i}", "real", True if i < 4 else None, True, 1) for i in range(20)]
    cells += [(f"d{i}", "real", True if i < 24 else None, False, 1) for i in range(20, 40)]
    res = audit_table(audit_rows(cells), sampled_by_verdict=True, seed=0)
    real = next(c for c in res.judges[0].corrected if c.side == "real")
    assert real.corrected_rate == pytest.approx(1.0)


def _rg_table(se_hits: int, sp_hits: int, n: int, q_pos: int, q_n: int) -> pd.DataFrame:
    """n true positives (se_hits called positive) and n true negatives (sp_hits called negative),
    labelled, one per task; plus q_n unlabelled real episodes of which q_pos judged positive."""
    cells: list[tuple[str, str, bool | None, bool, int]] = []
    cells += [(f"p{i}", "real", True, i < se_hits, 1) for i in range(n)]
    cells += [(f"n{i}", "real", False, i >= sp_hits, 1) for i in range(n)]
    cells += [(f"u{i}", "real", None, i < q_pos, 1) for i in range(q_n)]
    return audit_rows(cells)


def test_a_near_chance_judge_is_refused_not_clipped():
    # Se = 11/20, Sp = 10/20: Youden 0.05, SE √(.55·.45/20 + .5·.5/20) = 0.1577, lower bound < 0.
    res = audit_table(_rg_table(11, 10, 20, 60, 100), seed=0)
    (c,) = res.judges[0].corrected
    assert not c.estimable and c.corrected_se is None
    assert "not shown to beat chance" in c.note and "0.050" in c.note
    assert any("not estimable" in w for w in res.warnings)
    # A good judge on the same sizes is corrected: (q + Sp − 1)/(Se + Sp − 1) by hand.
    q = (18 + 2 + 60) / 140
    res = audit_table(_rg_table(18, 18, 20, 60, 100), seed=0)
    (c,) = res.judges[0].corrected
    assert c.method == "rogan-gladen" and c.corrected_rate == pytest.approx((q + 0.9 - 1) / 0.8)


def test_a_clipped_correction_says_so():
    # q far below the judge's false-positive rate: (q + Sp − 1)/(Se + Sp − 1) < 0.
    res = audit_table(_rg_table(18, 19, 20, 0, 600), seed=0)
    (c,) = res.judges[0].corrected
    assert c.corrected_rate == 0.0 and c.clipped
    assert "clipped" in c.note and any("clipped" in w for w in res.warnings)


def test_a_fully_labelled_side_reports_its_truth_rate():
    cells: list[tuple[str, str, bool | None, bool, int]] = [
        (f"t{i}", "real", i < 12, i < 10 or i >= 18, 1) for i in range(20)
    ]
    res = audit_table(audit_rows(cells), seed=0)
    (c,) = res.judges[0].corrected
    assert c.method == "observed truth" and c.corrected_rate == pytest.approx(12 / 20)
    assert c.corrected_se == pytest.approx((0.6 * 0.4 / 20) ** 0.5)


def test_audit_json_carries_estimable_and_warnings(tmp_path: Path):
    from typer.testing import CliRunner

    from realbench.cli import app

    path = tmp_path / "t.csv"
    _two_sided(False).to_csv(path, index=False)
    res = CliRunner().invoke(app, ["audit", "--table", str(path), "--sampled-by-verdict", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    real = next(c for c in out["judges"]["j"]["corrected"] if c["side"] == "real")
    assert real["estimable"] is False and "NPV" in real["reason"]
    assert any("not estimable" in w for w in out["warnings"])
    res = CliRunner().invoke(
        app, ["audit", "--table", str(path), "--sampled-by-verdict", "--borrow-from", "clone", "--json"]
    )
    assert res.exit_code == 0, res.output
    real = next(c for c in json.loads(res.output)["judges"]["j"]["corrected"] if c["side"] == "real")
    assert real["estimable"] is True
    assert real["model"] == TRAINED
