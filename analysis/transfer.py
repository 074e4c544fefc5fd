"""Retention per drift profile for learned policies: the transfer study's table, plot and findings.

Input is one retention result (``retention.json`` of a study) per (trained policy, drift profile);
output is a report section. Nothing here runs episodes: the study that produced the results is
passed in as data, so this module stays free of devices and clones.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from pydantic import BaseModel, ConfigDict  # noqa: E402

from analysis.plots import PALETTE, to_data_uri  # noqa: E402
from analysis.report import Section, _table  # noqa: E402

# Profiles named by what they change on the phone, for the findings' sentences.
MECHANISMS = {
    "mild": "a launch ad, some relabelled buttons, a shifted layout and slower responses",
    "relabel": "relabelled buttons (text matching on a node's label no longer finds it)",
    "layout": "a shifted layout (every node's bounds move down)",
    "interruptions": "pop-ups over the app (the policy has to dismiss them before its first useful tap)",
}


class TransferRow(BaseModel):
    """One trained policy on one drift profile: both gains over base and their ratio."""

    model_config = ConfigDict(frozen=True)

    policy: str  # what the policy is, in words
    agent: str  # the recorded agent name (policy:<name>@<hash>)
    profile: str
    n_tasks: int | None
    gain_clone: float | None
    gain_clone_ci: tuple[float, float] | None
    gain_phone: float | None
    gain_phone_ci: tuple[float, float] | None
    retention: float | None
    retention_ci: tuple[float, float] | None
    interval: str  # the Fieller set as text (may be unbounded), or why there is none
    estimand: str | None


def _pair(value: Any) -> tuple[float, float] | None:
    if not isinstance(value, Sequence) or len(value) != 2 or any(v is None for v in value):
        return None
    return float(value[0]), float(value[1])


def _gain(data: Mapping[str, Any], key: str) -> tuple[float | None, tuple[float, float] | None]:
    g = data.get(key)
    if not isinstance(g, Mapping):
        return None, None
    return float(g["mean"]), _pair(g.get("ci"))


def row_from_retention(policy: str, agent: str, profile: str, data: Mapping[str, Any]) -> TransferRow:
    """A table row from a study's retention result (``Study.retention``)."""
    gc, gc_ci = _gain(data, "gain_clone")
    gp, gp_ci = _gain(data, "gain_real")
    value = data.get("retention")
    interval = data.get("fieller_set_text") or data.get("reason") or data.get("not_computed") or "—"
    return TransferRow(
        policy=policy,
        agent=agent,
        profile=profile,
        n_tasks=data.get("n_tasks"),
        gain_clone=gc,
        gain_clone_ci=gc_ci,
        gain_phone=gp,
        gain_phone_ci=gp_ci,
        retention=float(value) if isinstance(value, int | float) and math.isfinite(value) else None,
        retention_ci=_pair(data.get("fieller_ci")),
        interval=str(interval),
        estimand=data.get("estimand"),
    )


def _fmt(x: float | None, ci: tuple[float, float] | None = None) -> str:
    if x is None:
        return "—"
    return f"{x:+.2f}" if ci is None else f"{x:+.2f} [{ci[0]:+.2f}, {ci[1]:+.2f}]"


def transfer_table(rows: Sequence[TransferRow]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "trained policy": r.policy,
                "agent": r.agent,
                "drift profile": r.profile,
                "tasks": r.n_tasks,
                "clone gain [95% CI]": _fmt(r.gain_clone, r.gain_clone_ci),
                "phone gain [95% CI]": _fmt(r.gain_phone, r.gain_phone_ci),
                "retention": "not estimable" if r.retention is None else f"{r.retention:.2f}",
                "Fieller 95% set": r.interval,
            }
            for r in rows
        ]
    )


def retention_plot(rows: Sequence[TransferRow], profiles: Sequence[str]) -> str:
    """Retention per drift profile, one series per trained policy, Fieller intervals as bars.

    A profile whose retention is not estimable shows its phone-gain / clone-gain point hollow when
    both gains exist, and nothing when they do not; an unbounded interval is clipped to the axes.
    """
    policies = list(dict.fromkeys(r.policy for r in rows))
    fig, ax = plt.subplots(figsize=(max(5.0, 1.3 * len(profiles) + 2), 3.6))
    width = 0.8 / max(len(policies), 1)
    for i, policy in enumerate(policies):
        by_profile = {r.profile: r for r in rows if r.policy == policy}
        colour = PALETTE[i % len(PALETTE)]
        for j, profile in enumerate(profiles):
            r = by_profile.get(profile)
            if r is None:
                continue
            x = j + (i - (len(policies) - 1) / 2) * width
            if r.retention is not None:
                lo, hi = r.retention_ci or (r.retention, r.retention)
                ax.errorbar(
                    x,
                    r.retention,
                    yerr=[[r.retention - lo], [hi - r.retention]],
                    fmt="o",
                    color=colour,
                    capsize=3,
                )
            elif r.gain_clone and r.gain_phone is not None:
                ax.plot(x, r.gain_phone / r.gain_clone, "o", mfc="none", color=colour)
        ax.plot([], [], "o", color=colour, label=policy)
    ax.axhline(1.0, color="grey", lw=0.8, ls=":")
    ax.axhline(0.0, color="grey", lw=0.8)
    ax.set_xticks(np.arange(len(profiles)), list(profiles))
    ax.set_ylim(-0.5, 1.5)
    ax.set_xlabel("drift profile on the virtual phones")
    ax.set_ylabel("retention (phone gain / clone gain)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1, 1))
    ax.set_title("retention per drift profile (bars: Fieller 95%; hollow: not estimable)")
    return to_data_uri(fig)


def _phone_gain(rows: Sequence[TransferRow], policy: str, profile: str) -> TransferRow | None:
    return next((r for r in rows if r.policy == policy and r.profile == profile), None)


def findings(rows: Sequence[TransferRow], reference: str = "none") -> list[str]:
    """One sentence per drift profile and trained policy where the data shows a change from the
    undrifted phone: how much of the phone gain the profile's mechanism removed, and, with two
    policies, whether randomised training kept more of it. Said only where the phone gains'
    intervals do not overlap (a difference inside the noise is reported as such)."""
    out: list[str] = []
    policies = list(dict.fromkeys(r.policy for r in rows))
    for profile in dict.fromkeys(r.profile for r in rows):
        if profile == reference:
            continue
        mechanism = MECHANISMS.get(profile, f"the {profile!r} drift profile")
        for policy in policies:
            ref, cur = _phone_gain(rows, policy, reference), _phone_gain(rows, policy, profile)
            if ref is None or cur is None or ref.gain_phone is None or cur.gain_phone is None:
                continue
            drop = ref.gain_phone - cur.gain_phone
            separated = (
                ref.gain_phone_ci is not None
                and cur.gain_phone_ci is not None
                and (
                    ref.gain_phone_ci[0] > cur.gain_phone_ci[1] or cur.gain_phone_ci[0] > ref.gain_phone_ci[1]
                )
            )
            change = (
                f"removed {drift_pts(drop)} points"
                if drop > 0
                else f"added {drift_pts(-drop)} points"
                if drop < 0
                else "left it unchanged"
            )
            strength = "" if separated else " (within the noise: the 95% intervals overlap)"
            out.append(
                f"{mechanism[0].upper()}{mechanism[1:]}: for {policy}, the phone gain goes from "
                f"{ref.gain_phone:+.2f} undrifted to {cur.gain_phone:+.2f}, so this drift {change}{strength}."
            )
        if len(policies) == 2:
            a, b = (_phone_gain(rows, p, profile) for p in policies)
            if a and b and a.gain_phone is not None and b.gain_phone is not None:
                better = policies[1] if b.gain_phone > a.gain_phone else policies[0]
                out.append(
                    f"Under {profile}, {better} keeps the larger phone gain "
                    f"({a.gain_phone:+.2f} vs {b.gain_phone:+.2f}), a difference of "
                    f"{abs(drift_pts(b.gain_phone - a.gain_phone))} points."
                )
    return out


def drift_pts(x: float) -> int:
    return round(100 * x)


def transfer_section(
    rows: Sequence[TransferRow], profiles: Sequence[str], notes: Sequence[str] = ()
) -> Section:
    s = Section("transfer", "Transfer of learned policies per drift profile")
    if not rows:
        s.empty = "No transfer-study results."
        return s
    s.images.append(retention_plot(rows, profiles))
    s.tables.append(_table(transfer_table(rows)))
    s.notes.extend(notes)
    s.notes.extend(findings(rows))
    return s


__all__ = [
    "TransferRow",
    "findings",
    "retention_plot",
    "row_from_retention",
    "transfer_section",
    "transfer_table",
]
