"""Matplotlib figures for the HTML report, returned as PNG data URIs (the report works offline)."""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

# CJK fallback so Chinese task or app names render where fonts-noto-cjk is installed.
plt.rcParams["font.family"] = ["DejaVu Sans", "Noto Sans CJK JP", "Noto Sans CJK SC", "sans-serif"]
plt.rcParams["figure.dpi"] = 100

SYNTHETIC_COLOUR = "#b0b0b0"
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf"]


def to_data_uri(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def success_bars(rows: pd.DataFrame) -> str:
    """rows: label, target, rate, lo, hi, synthetic (bool). Grouped bars with Wilson intervals."""
    targets = list(dict.fromkeys(rows["target"]))
    labels = list(dict.fromkeys(rows["label"]))
    fig, ax = plt.subplots(figsize=(max(5.0, 1.6 * len(targets) * max(1, len(labels)) / 2 + 2), 3.6))
    width = 0.8 / max(len(labels), 1)
    for i, label in enumerate(labels):
        sub = rows[rows["label"] == label].set_index("target").reindex(targets)
        x = np.arange(len(targets)) + (i - (len(labels) - 1) / 2) * width
        rate = sub["rate"].to_numpy(float)
        err = np.vstack([rate - sub["lo"].to_numpy(float), sub["hi"].to_numpy(float) - rate])
        synthetic = bool(sub["synthetic"].fillna(False).any())
        ax.bar(
            x,
            rate,
            width,
            yerr=np.nan_to_num(err),
            capsize=3,
            label=label,
            color=PALETTE[i % len(PALETTE)],
            hatch="//" if synthetic else None,
            edgecolor="white" if not synthetic else "black",
        )
    ax.set_xticks(np.arange(len(targets)), targets, rotation=10)
    ax.set_ylim(0, 1)
    ax.set_ylabel("success rate (Wilson 95%)")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1, 1))
    ax.set_title("success by model × target (hatched: synthetic policy)")
    return to_data_uri(fig)


def paired_matrix(matrix: pd.DataFrame) -> str:
    """Per-task success rates, tasks × (model, side) columns, as a heatmap."""
    fig, ax = plt.subplots(figsize=(1.4 * matrix.shape[1] + 2, 0.28 * matrix.shape[0] + 1.5))
    im = ax.imshow(matrix.to_numpy(float), vmin=0, vmax=1, cmap="RdYlGn", aspect="auto")
    ax.set_xticks(
        range(matrix.shape[1]), [str(c) for c in matrix.columns], rotation=20, ha="right", fontsize=8
    )
    ax.set_yticks(range(matrix.shape[0]), [str(i) for i in matrix.index], fontsize=7)
    for (r, c), v in np.ndenumerate(matrix.to_numpy(float)):
        if np.isfinite(v):
            ax.text(c, r, f"{v:.2f}", ha="center", va="center", fontsize=6)
    fig.colorbar(im, ax=ax, fraction=0.03, label="success rate")
    ax.set_title("per-task outcomes: clone vs real, base vs trained")
    return to_data_uri(fig)


# One estimand of the retention figure: label, value, Fieller CI, BCa CI, exact Fieller set pieces.
EstimateRow = tuple[
    str,
    float | None,
    tuple[float, float] | None,
    tuple[float, float] | None,
    Sequence[tuple[float, float]],
]


def retention_plot(
    estimates: Sequence[EstimateRow],
    references: Sequence[tuple[str, float, str]],
) -> str:
    """The retention figure as a PNG data URI (see `retention_figure`)."""
    return to_data_uri(retention_figure(estimates, references))


def retention_figure(
    estimates: Sequence[EstimateRow],
    references: Sequence[tuple[str, float, str]],
) -> Figure:
    """Each named estimand with its Fieller and BCa intervals; a not-estimable one shows its exact
    Fieller set (bounded pieces as lines, unbounded ones as an arrow from the finite end) and no point. A published
    reference (estimand label, value, text) is drawn only on the row of the estimand it was
    computed for."""
    lo_lim, hi_lim = -1.0, 2.5
    fig, ax = plt.subplots(figsize=(6.8, 0.75 * len(estimates) + 1.6))
    ticks, names = [], []
    clipped = False
    for y, (label, value, fieller_ci, bca_ci, pieces) in enumerate(estimates):
        if fieller_ci is not None:
            ax.plot(
                fieller_ci,
                [y + 0.12, y + 0.12],
                color="#1f77b4",
                lw=3,
                label="Fieller 95%" if "Fieller 95%" not in names else None,
            )
        elif pieces:
            # An unbounded piece is an arrow from its finite end with "to ±∞" beside it, never a line
            # running to the axis edge: a line there reads as an interval that ends at the edge.
            for lo, hi in pieces:
                if np.isfinite(lo) and np.isfinite(hi):
                    a, b = max(lo, lo_lim), min(hi, hi_lim)
                    if a < b:
                        ax.plot([a, b], [y + 0.12, y + 0.12], color="#9ecae1", lw=3)
                    continue
                if np.isinf(lo) and np.isinf(hi):
                    ax.text(
                        (lo_lim + hi_lim) / 2,
                        y - 0.2,  # below the row: a published reference is labelled above it
                        "unbounded: (−∞, ∞)",
                        ha="center",
                        va="center",
                        fontsize=8,
                        color="#3b6ea5",
                    )
                    continue
                end = hi if np.isinf(lo) else lo
                clipped |= not lo_lim + 0.3 <= end <= hi_lim - 0.3
                start = float(np.clip(end, lo_lim + 0.3, hi_lim - 0.3))
                step = -0.3 if np.isinf(lo) else 0.3
                ax.annotate(
                    "",
                    xy=(start + step, y + 0.12),
                    xytext=(start, y + 0.12),
                    arrowprops={"arrowstyle": "-|>", "color": "#3b6ea5", "lw": 1.5},
                )
                ax.text(
                    start + step,
                    y + 0.26,
                    "to −∞" if np.isinf(lo) else "to +∞",
                    ha="center",
                    fontsize=7,
                    color="#3b6ea5",
                )
        if bca_ci is not None:
            ax.plot(bca_ci, [y - 0.12, y - 0.12], color="#ff7f0e", lw=3)
        if value is not None and np.isfinite(value):
            ax.plot([value], [y], "ko")
        for ref_label, ref_value, text in references:
            if ref_label == label:
                ax.plot([ref_value], [y], marker="D", color="grey", ms=7, ls="none")
                ax.text(ref_value, y + 0.3, text, fontsize=7, color="grey", ha="center")
        ends = [v for ci in (fieller_ci, bca_ci) if ci is not None for v in ci]
        clipped |= any(v < lo_lim or v > hi_lim for v in ends)
        ticks.append(y)
        names.append(label + ("" if fieller_ci is not None else " (not estimable: exact Fieller set)"))
    ax.axvline(1.0, color="black", lw=0.5)
    if clipped:
        ax.text(0.01, 0.01, "axis clipped to [-1, 2.5]; see the table", transform=ax.transAxes, fontsize=7)
    ax.set_xlim(lo_lim, hi_lim)
    ax.set_ylim(-0.6, len(estimates) - 0.4)
    ax.set_yticks(ticks, names)
    ax.set_xlabel("retention (device gain / clone gain)")
    ax.plot([], [], color="#1f77b4", lw=3, label="Fieller 95%")
    ax.plot([], [], color="#ff7f0e", lw=3, label="BCa 95%")
    ax.plot([], [], marker="D", color="grey", ls="none", label="published (its own estimand only)")
    handles, labels = ax.get_legend_handles_labels()
    seen = dict(zip(labels, handles, strict=True))
    ax.legend(seen.values(), seen.keys(), fontsize=7, loc="lower right")
    ax.set_title("gain retention by estimand")
    return fig


def confusion_plot(judge: str, tp: int, fn: int, fp: int, tn: int) -> str:
    m = np.array([[tp, fn], [fp, tn]])
    fig, ax = plt.subplots(figsize=(3.2, 2.8))
    ax.imshow(m, cmap="Blues")
    for (r, c), v in np.ndenumerate(m):
        ax.text(c, r, str(v), ha="center", va="center", fontsize=12)
    ax.set_xticks([0, 1], ["judge: success", "judge: failure"], fontsize=8)
    ax.set_yticks([0, 1], ["truth: success", "truth: failure"], fontsize=8)
    ax.set_title(f"judge {judge}", fontsize=10)
    return to_data_uri(fig)


def error_by_length(series: dict[str, list[tuple[str, float, float, float]]]) -> str:
    """judge → [(tercile, error, lo, hi)]: judge error by trajectory-length tercile."""
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    for i, (judge, points) in enumerate(series.items()):
        x = np.arange(len(points)) + 0.08 * i
        err = np.array([p[1] for p in points])
        lo = np.array([p[2] for p in points])
        hi = np.array([p[3] for p in points])
        ax.errorbar(
            x, err, yerr=[err - lo, hi - err], marker="o", capsize=3, label=judge, color=PALETTE[i % 8]
        )
        ax.set_xticks(np.arange(len(points)), [p[0] for p in points], fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("judge error rate (Wilson 95%)")
    ax.set_title("judge error vs trajectory length")
    ax.legend(fontsize=8)
    return to_data_uri(fig)


def abort_rates(rows: pd.DataFrame) -> str:
    """rows: label, rate, lo, hi. Bar per device of the env_invalid (abort) rate."""
    fig, ax = plt.subplots(figsize=(max(4.0, 0.9 * len(rows) + 2), 3.2))
    x = np.arange(len(rows))
    rate = rows["rate"].to_numpy(float)
    ax.bar(x, rate, yerr=[rate - rows["lo"].to_numpy(float), rows["hi"].to_numpy(float) - rate], capsize=3)
    ax.set_xticks(x, rows["label"].tolist(), rotation=15, ha="right", fontsize=8)
    ax.set_ylim(0, 1)
    ax.set_ylabel("env_invalid rate (Wilson 95%)")
    ax.set_title("aborts per device")
    return to_data_uri(fig)
