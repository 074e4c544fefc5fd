"""The transfer study: how much of a learned policy's clone gain survives on phones, per drift profile.

For each trained policy (trained on the clone; trained on the clone with drift randomisation) and
each drift profile of the virtual phones, the whole study (`realbench.study`) runs base vs that
policy: clone runs, selection, phone runs, checks and judges, retention. The clone runs are shared
by every study (one clone store; a finished episode is not run again), the phone runs are the
profile's own. The result is one table and one plot of retention per profile for both policies,
with intervals, added to a report as its own section (`analysis.transfer`).

Policies are element-policy checkpoints (`policy:DIR`); they are named by the description their
checkpoint carries ("a small element policy trained by RL on the clone, N updates, seed S").
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from realbench.errors import ConfigError
from realbench.policy_refs import CHECKPOINTS, PolicyRef
from realbench.safe_yaml import load_yaml_text, read_yaml_file
from realbench.study import Study, StudyConfig

log = logging.getLogger(__name__)

PROFILES: tuple[str, ...] = ("none", "mild", "relabel", "layout", "interruptions")


@dataclass
class TransferConfig:
    out: Path = Path("out/transfer")
    base: str = f"policy:{CHECKPOINTS / 'base'}"
    trained: list[str] = field(
        default_factory=lambda: [
            f"policy:{CHECKPOINTS / 'trained'}",
            f"policy:{CHECKPOINTS / 'trained-rand'}",
        ]
    )
    profiles: list[str] = field(default_factory=lambda: list(PROFILES))
    # Every other setting (pack, tasks, repeats, budget, rig, phones, seed) is the study's.
    study: StudyConfig = field(default_factory=StudyConfig)


class PolicyStudy(Study):
    """A study that keeps its clone runs in a store shared with the other studies of the transfer
    study (its checkpoints run by spec and are analysed by recorded name through `StudyConfig.agents`,
    as in any study)."""

    def __init__(self, config: StudyConfig, clone_store: Path, console: Console | None = None):
        super().__init__(config, console)
        self._clone_store = clone_store

    @property
    def clone_store(self) -> Path:
        return self._clone_store


@dataclass
class Cell:
    """One study of the transfer study: a trained policy under a drift profile."""

    policy: PolicyRef
    profile: str
    out: Path
    retention: dict[str, Any] | None


StudyRunner = Callable[[StudyConfig, Path], dict[str, Any] | None]


def run_policy_study(config: StudyConfig, clone_store: Path) -> dict[str, Any] | None:
    return PolicyStudy(config, clone_store).run().retention


def rig_with_drift(rig: Path, profile: str, out: Path) -> Path:
    """A copy of a virtual rig whose phones show `profile`'s drift."""
    raw = load_yaml_text(read_yaml_file(Path(rig), what="rig"))
    if not isinstance(raw, dict) or not isinstance(raw.get("virtual"), dict):
        raise ConfigError(f"{rig}: the transfer study needs a rig of virtual phones (a `virtual:` section)")
    raw["virtual"]["drift"] = profile
    raw["description"] = f"{raw.get('description', '')} (drift {profile})".strip()
    out.mkdir(parents=True, exist_ok=True)
    path = out / "rig.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return path


class TransferStudy:
    def __init__(self, config: TransferConfig, runner: StudyRunner = run_policy_study) -> None:
        self.cfg = config
        self.runner = runner
        self.out = Path(config.out)

    def cells(self) -> list[Cell]:
        base = PolicyRef.of(self.cfg.base)
        cells: list[Cell] = []
        for spec in self.cfg.trained:
            trained = PolicyRef.of(spec)
            tag = Path(spec.split(":", 1)[-1]).name or trained.agent
            for profile in self.cfg.profiles:
                folder = self.out / tag / profile
                cfg = replace(
                    self.cfg.study,
                    out=folder,
                    base=base.agent,
                    trained=trained.agent,
                    agents={**self.cfg.study.agents, base.agent: base.spec, trained.agent: trained.spec},
                    rig=rig_with_drift(self.cfg.study.rig, profile, folder),
                )
                log.info("transfer study: %s under %s", trained.description, profile)
                retention = self.runner(cfg, self.out / "clone")
                cells.append(Cell(trained, profile, folder, retention))
        return cells

    def run(self) -> Path:
        """Runs every study and writes ``transfer.json`` and ``report.html``; returns the report."""
        from analysis.report import build_report_from_stores
        from analysis.transfer import row_from_retention, transfer_section

        cells = self.cells()
        rows = [
            row_from_retention(c.policy.description, c.policy.agent, c.profile, c.retention or {})
            for c in cells
        ]
        base = PolicyRef.of(self.cfg.base)
        notes = [
            f"Base: {base.description} ({base.agent}). Trained policies: "
            + "; ".join(
                f"{c.policy.description} ({c.policy.agent})" for c in cells[:: max(len(self.cfg.profiles), 1)]
            )
            + ". The phones are virtual phones (a test rig) showing drifted clones; the judge is the "
            "synthetic judge unless the study named others."
        ]
        (self.out / "transfer.json").write_text(
            json.dumps(
                {"base": base.agent, "profiles": self.cfg.profiles, "rows": [r.model_dump() for r in rows]},
                ensure_ascii=False,
                indent=2,
            ),
            encoding="utf-8",
        )
        section = transfer_section(rows, self.cfg.profiles, notes)
        first = cells[0]
        stores = [s for s in (self.out / "clone", first.out / "real") if s.exists()]
        if not stores:
            # Nothing ran on the clone or the phones (every study failed early, or its runner only
            # returned results): the section still gets a page of its own.
            return write_section_page(section, self.out / "report.html")
        return build_report_from_stores(
            stores,
            out=self.out / "report.html",
            base=base.agent,
            trained=first.policy.agent,
            tasks=first.out / "signal.json" if (first.out / "signal.json").exists() else None,
            seed=self.cfg.study.seed,
            extra_sections=[section],
        )


PAGE = """<!doctype html><html><head><meta charset="utf-8"><title>{{ s.title }}</title></head><body>
<section id="{{ s.id }}"><h2>{{ s.title }}</h2>
{% if s.empty %}<p>{{ s.empty }}</p>{% endif %}
{% for img in s.images %}<img alt="{{ s.title }} plot" src="{{ img }}">{% endfor %}
{% for t in s.tables %}{{ t | safe }}{% endfor %}
{% for n in s.notes %}<p>{{ n }}</p>{% endfor %}
</section></body></html>
"""


def write_section_page(section: Any, out: Path) -> Path:
    from jinja2 import Environment, select_autoescape

    env = Environment(autoescape=select_autoescape(default_for_string=True))
    out.write_text(env.from_string(PAGE).render(s=section), encoding="utf-8")
    return out


__all__ = [
    "CHECKPOINTS",
    "PROFILES",
    "PolicyRef",
    "PolicyStudy",
    "TransferConfig",
    "TransferStudy",
    "rig_with_drift",
]
