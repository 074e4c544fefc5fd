"""Which tasks a rig's accounts cannot instantiate (`realbench check-pack --rig R`)."""

from __future__ import annotations

from dataclasses import dataclass

from devices.rig import Rig
from realbench.recipes import fixture_gaps
from realbench.taskpack import TaskPack, fixture_choices


@dataclass(frozen=True)
class FixtureGap:
    task: str
    account: str
    gaps: tuple[str, ...]

    def describe(self) -> str:
        return f"{self.task} (account {self.account}): {'; '.join(self.gaps)}"


def uninstantiable(pack: TaskPack, rig: Rig) -> list[FixtureGap]:
    """Per task and account of the pack's app: what the account lacks for the task's parameters."""
    accounts = [a for a in rig.accounts if a.app == pack.real_app.package]
    out: list[FixtureGap] = []
    for task in pack.tasks:
        gate = task.real.fixtures
        if not gate.params and not gate.holds:
            continue
        if not accounts:
            out.append(
                FixtureGap(task.id, "(none)", (f"the rig has no account for {pack.real_app.package}",))
            )
            continue
        for account in accounts:
            gaps = fixture_gaps(gate, fixture_choices(task), account.fixture)
            if gaps:
                out.append(FixtureGap(task.id, account.name, tuple(gaps)))
    return out
