"""The report opens with a summary box a newcomer can read: the headline estimand with its interval
(or "not estimable", why, and what would make it estimable), the gains on both sides and the judge's
error rates; R_JJ and the slope explained; one clone-only task count; no endless dotted lines.

Verdicts are read from the rendered HTML (parsed) and from the matplotlib figure itself."""

from __future__ import annotations

import math
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.lines import Line2D

from analysis.plots import retention_figure
from analysis.report import ReportInputs, build_report
from analysis.report_summary import runs_factor_for_bounded_interval, tasks_for_bounded_interval
from analysis.retention import retention_from_table

BASE, TRAINED = "synthetic:base", "synthetic:trained"


class _Texts(HTMLParser):
    """Text of every element with an id (nested text included), and the order ids appear in."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str | None] = []
        self.texts: dict[str, str] = {}
        self.order: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("img", "br", "meta", "input"):
            return
        ident = dict(attrs).get("id")
        if ident:
            self.order.append(ident)
            self.texts.setdefault(ident, "")
        self.stack.append(ident)

    def handle_endtag(self, tag: str) -> None:
        if tag not in ("img", "br", "meta", "input") and self.stack:
            self.stack.pop()

    def handle_data(self, data: str) -> None:
        for ident in self.stack:
            if ident:
                self.texts[ident] += data


def parse(page: str) -> _Texts:
    p = _Texts()
    p.feed(page)
    return p


def episodes(
    gains: dict[str, tuple[float, float, float, float]],
    runs: int,
    seed: int = 0,
    device_skip: tuple[str, ...] = (),
) -> pd.DataFrame:
    """Episodes of both models on the clone and a virtual phone; gains: task → (clone p_b, p_r,
    device p_b, p_r). Success is drawn exactly: the first round(p·runs) runs succeed."""
    rows = []
    for task, (sb, sr, db, dr) in gains.items():
        for env, kind, pair in (("clone", "headless-clone", (sb, sr)), ("real", "virtual-phone", (db, dr))):
            if env == "real" and task in device_skip:
                continue
            for model, p in zip((BASE, TRAINED), pair, strict=True):
                k = round(p * runs)
                for r in range(runs):
                    key = f"{env}/{model}/{task}/{r}"
                    rows.append(
                        {
                            "key": key,
                            "episode_id": key,
                            "task": task,
                            "model": model,
                            "env": env,
                            "success": r < k,
                            "scored": True,
                            "outcome": "success" if r < k else "failure",
                            "device_kind": kind,
                            "device_serial": "clone-0" if env == "clone" else "vphone-1",
                            "app": "train_ticketing",
                        }
                    )
    return pd.DataFrame(rows)


def render(tmp_path: Path, ep: pd.DataFrame, strata: dict[str, str] | None = None, population=None) -> str:
    inputs = ReportInputs(
        episodes=ep,
        verdicts=pd.DataFrame(
            columns=["key", "episode_id", "source", "name", "success", "abstained", "reason"]
        ),
        steps=lambda key: [],
        episode_dir=lambda key: tmp_path,
        strata=strata,
        population=population,
    )
    out = build_report(inputs, out=tmp_path / "report.html", base=BASE, trained=TRAINED, resamples=200)
    return out.read_text(encoding="utf-8")


def strong_gains(n: int) -> dict[str, tuple[float, float, float, float]]:
    rng = np.random.default_rng(1)
    out = {}
    for i in range(n):
        sb = float(rng.choice([0.0, 0.25, 0.5]))
        out[f"t{i:02d}"] = (sb, min(1.0, sb + 0.5), sb, min(1.0, sb + 0.5 - 0.25 * (i % 2)))
    return out


def test_the_report_opens_with_an_estimable_headline_and_its_interval(tmp_path: Path) -> None:
    page = render(tmp_path, episodes(strong_gains(10), runs=4))
    doc = parse(page)
    # The summary box comes before every section of detail.
    assert doc.order.index("summary") < doc.order.index("success") < doc.order.index("retention")
    headline = doc.texts["summary-headline"]
    assert "R_sample" in headline
    value = float(doc.texts["summary-value"])
    assert 0 < value < 2
    lo, hi = map(
        float, re.findall(r"Fieller 95% \[(-?[\d.]+), (-?[\d.]+)\]", doc.texts["summary-interval"])[0]
    )
    assert lo < value < hi
    assert "summary-why" not in doc.texts
    summary = doc.texts["summary"]
    assert "clone" in summary and "real [virtual phone]" in summary and "transfer gap" in summary
    # R_JJ and the slope are explained in words, not only named.
    assert "both sides scored by the judge" in doc.texts["summary-rjj"]
    assert "through the origin" in doc.texts["summary-slope"]
    assert "Judge error rates" in summary


def test_a_not_estimable_headline_says_why_and_how_many_more_tasks(tmp_path: Path) -> None:
    # Clone gains that barely differ from 0: Fieller's g ≥ 1.
    gains = {
        f"t{i}": (0.5, 0.5 + (0.25 if i % 3 == 0 else -0.25 if i % 3 == 1 else 0.0), 0.5, 0.5)
        for i in range(6)
    }
    gains["t0"] = (0.25, 0.75, 0.5, 0.75)
    page = render(tmp_path, episodes(gains, runs=4))
    doc = parse(page)
    assert doc.texts["summary-value"].strip() == "not estimable"
    assert "summary-interval" not in doc.texts
    why = doc.texts["summary-why"]
    assert "not estimable" in why
    remedy = doc.texts["summary-remedy"]
    found = re.search(r"About (\d+) paired tasks instead of (\d+)", remedy)
    assert found is not None, remedy
    need = int(found.group(1))
    assert need > 6
    # The estimate of what is needed is what METHODS' arithmetic gives: v_bb ∝ 1/n.
    table = episodes(gains, runs=4).assign(
        stratum="all", run=lambda d: d.groupby(["task", "model", "env"]).cumcount()
    )
    res = retention_from_table(table, base=BASE, trained=TRAINED, n_resamples=0)
    assert res.sample.ratio is not None
    g = res.sample.ratio.fieller_g
    assert g >= 1
    assert need == tasks_for_bounded_interval(6, g)
    assert need * 1.0 / 6 * (1 / g) > 1 - 1e-9  # enough tasks brings g below 1


def test_a_negative_clone_gain_is_not_a_matter_of_more_tasks(tmp_path: Path) -> None:
    gains = {f"t{i}": (0.75, 0.25 + 0.25 * (i % 2), 0.5, 0.5) for i in range(6)}
    doc = parse(render(tmp_path, episodes(gains, runs=4)))
    assert doc.texts["summary-value"].strip() == "not estimable"
    assert "No number of extra tasks or runs" in doc.texts["summary-remedy"]


def test_a_missing_signal_stratum_asks_for_signal_tasks(tmp_path: Path) -> None:
    gains = strong_gains(6)
    strata = {t: ("gain" if t == "t00" else "both-pass") for t in gains}
    doc = parse(render(tmp_path, episodes(gains, runs=4), strata=strata))
    # One signal task: R_signal cannot be the headline; the headline falls back and is estimable,
    # and the signal estimand's own reason stays in the retention section.
    assert "R_sample" in doc.texts["summary-headline"]


def test_runs_alone_cannot_bound_a_spread_between_tasks() -> None:
    per_task = pd.DataFrame(
        {"p_s_r": [1.0, 0.0, 1.0, 0.0], "p_s_b": [0.0, 1.0, 0.0, 1.0], "n_s_r": 4, "n_s_b": 4}
    ).assign(g_s=lambda d: d["p_s_r"] - d["p_s_b"])
    assert runs_factor_for_bounded_interval(per_task, 3.0) is None  # no run-to-run noise to remove
    noisy = pd.DataFrame(
        {"p_s_r": [0.5] * 4, "p_s_b": [0.25, 0.5, 0.25, 0.5], "n_s_r": 4, "n_s_b": 4}
    ).assign(g_s=lambda d: d["p_s_r"] - d["p_s_b"])
    factor = runs_factor_for_bounded_interval(noisy, 1.2)
    assert factor is not None and factor > 1


def test_both_sections_give_the_same_clone_only_count_and_say_what_it_counts(tmp_path: Path) -> None:
    gains = strong_gains(10)
    selected = {t: "gain" for t in list(gains)[:7]}  # t07–t09 not selected for the phones
    # t05 and t06 were selected but never ran on the phone (skipped there): still clone-only.
    ep = episodes(gains, runs=2, device_skip=("t05", "t06", "t07", "t08", "t09"))
    page = render(tmp_path, ep, strata=selected)
    doc = parse(page)
    counts = {
        sec: re.findall(r"(\d+) task\(s\) have decided episodes on the clone only", doc.texts[sec])
        for sec in ("success", "retention")
    }
    assert counts["success"] == counts["retention"] == ["5"]
    for sec in ("success", "retention"):
        assert "3 not selected for the phones" in doc.texts[sec]
        assert "2 selected but with no decided device episode (t05, t06)" in doc.texts[sec]


def test_the_retention_plot_draws_no_endless_line_for_an_unbounded_set() -> None:
    inf = math.inf
    fig = retention_figure(
        [
            ("R_pop", None, None, None, [(-inf, -0.4), (0.6, inf)]),
            ("R_JJ", None, None, None, [(-inf, inf)]),
            ("R_sample", 0.9, (0.5, 1.3), (0.55, 1.25), []),
        ],
        [],
    )
    ax = fig.axes[0]
    lo_lim, hi_lim = ax.get_xlim()
    for line in ax.get_lines():
        x = np.atleast_1d(np.asarray(line.get_xdata(), float))
        if isinstance(line, Line2D) and x.size >= 2:
            assert line.get_linestyle() != ":", "no dotted lines"
            # No drawn interval runs to the axis edge (the only full-width line is the R = 1 rule).
            if not (x[0] == x[-1] == 1.0):
                assert x.min() > lo_lim and x.max() < hi_lim, x
    texts = [t.get_text() for t in ax.texts]
    assert "to −∞" in texts and "to +∞" in texts and "unbounded: (−∞, ∞)" in texts
    arrows = [a for a in ax.texts if getattr(a, "arrow_patch", None) is not None]
    assert len(arrows) == 2


@pytest.mark.parametrize("n,g", [(10, 1.5), (4, 3.0), (20, 1.01)])
def test_tasks_for_bounded_interval_brings_g_below_one(n: int, g: float) -> None:
    need = tasks_for_bounded_interval(n, g)
    assert g * n / need < 1 <= g * n / (need - 1) or need == n + 1
