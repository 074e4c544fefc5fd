"""The toy shop's verifier, its argument model, its wrong end states and its side-effect check."""

from __future__ import annotations

from typing import Any

from clones.base import State, snapshot
from clones.contracts import GoldenRun, SideEffectCheckSet, VerifierArgs, VerifierSet, WrongEnd
from realbench.outcome import Verdict
from realbench.taskpack import AnswerSpec

VERIFIERS = VerifierSet()
SIDE_EFFECT_CHECKS = SideEffectCheckSet()


class BoughtArgs(VerifierArgs):
    item: int  # usually the task parameter of the same name


@VERIFIERS.verifier("bought", args=BoughtArgs)
def bought(
    before: State, after: State, params: dict[str, Any], answer: str | None, spec: AnswerSpec
) -> Verdict:
    want = int(params["item"])
    new = after["user"]["orders"][len(before["user"]["orders"]) :]
    if any(o["item"] == want for o in new):
        return Verdict.ok("bought the item")
    return Verdict.fail(f"no new order for item {want}")


@VERIFIERS.wrong_end_states("bought")
def bought_something_else(run: GoldenRun) -> list[WrongEnd]:
    """The order is for the neighbouring item instead."""
    after = snapshot(run.after)
    want = int(run.instance.verifier_args["item"])
    for order in after["user"]["orders"][len(run.before["user"]["orders"]) :]:
        if order["item"] == want:
            order["item"] = want + 1
    return [WrongEnd("bought the neighbouring item", run.before, after, run.answer)]


@SIDE_EFFECT_CHECKS.check("one_order")
def one_order(before: State, after: State, params: dict[str, Any]) -> list[str]:
    extra = len(after["user"]["orders"]) - len(before["user"]["orders"])
    return [f"{extra} orders placed"] if extra > 1 else []
