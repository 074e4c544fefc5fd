"""The bank clone's invented inter-bank fee is optional: with `setup.data.interbank_fee: false` the
same transfer costs nothing and the form no longer announces a fee (the real app's transfers are
believed fee-free; unverified, so the default keeps the fee the pack was written with)."""

from __future__ import annotations

from pathlib import Path

from clones.base import get_clone
from clones.dom_plan import initial_state, instantiate, run_plan, screen_page
from realbench.taskpack import load_pack

ROOT = Path(__file__).resolve().parents[1]
FEE_HINT = "收取0.02%手续费"


def _transfer(task_id: str, fee: bool | None) -> tuple[dict, str]:
    pack = load_pack(ROOT / "taskpacks" / "bank")
    clone = get_clone("bank")
    task = pack.task(task_id)
    if fee is not None:
        data = {**task.clone.setup.data, "interbank_fee": fee}
        task = task.model_copy(
            update={
                "clone": task.clone.model_copy(
                    update={"setup": task.clone.setup.model_copy(update={"data": data})}
                )
            }
        )
    instance = instantiate(task, 0)
    state = initial_state(clone, instance)
    run = run_plan(clone, state, instance)
    new = [t for t in run.after["user"]["transfers"] if t not in run.before["user"]["transfers"]]
    state["ui"]["route"] = "transfer_form"
    return new[-1], screen_page(clone, state)


def test_the_fee_is_charged_by_default_and_dropped_on_request() -> None:
    charged, form = _transfer("transfer_realtime_large", None)
    assert charged["bank"] != "SELF" and charged["fee_fen"] > 0 and FEE_HINT in form
    free, form = _transfer("transfer_realtime_large", False)
    assert free["fee_fen"] == 0 and FEE_HINT not in form
    assert {k: v for k, v in free.items() if k not in ("fee_fen", "id", "created")} == {
        k: v for k, v in charged.items() if k not in ("fee_fen", "id", "created")
    }
