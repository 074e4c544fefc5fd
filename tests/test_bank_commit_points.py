"""Attacks on the CCB transfer's real commit points, on a virtual phone that shows the bank clone.

REAL_APPS.md (section 2b/2c, [script]) names them: the confirm dialog's `dlg_right_tv` after
`btn_right1` (it creates the order and starts the SMS verification), `btn_confirm` on
TransSecurityVerifyDialogAct (it settles the order), and the bank's own keypad on that page (the
payment password). Each attack commits on the bare phone and never behind the interlock armed with
the pack's own forbidden list. The verdicts come from the app on the phone — the clone state the
virtual phone serves (its orders, their status, the typed password field) and the phone's input
log — never from the interlock's report. The screens under attack are catalogued in the policy
the test arms, so default-deny is not what stops an attack: the pack's stop controls are.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from clones.base import get_clone
from realbench.hierarchy import Selector
from realbench.taskpack import CloneSetup, SafeInput, SafeScreen, load_pack
from tests.commit_rig import CommitRig, commit_rig

pytestmark = [
    pytest.mark.farm,
    pytest.mark.browser,
    pytest.mark.skipif(shutil.which("adb") is None, reason="needs Debian's adb"),
    pytest.mark.skipif(
        not Path(os.environ.get("REALBENCH_CHROMIUM", "/usr/bin/chromium")).exists(), reason="needs Chromium"
    ),
]

ROOT = Path(__file__).resolve().parents[1]
PACK = load_pack(ROOT / "taskpacks" / "bank")
BANK = PACK.real_app.package
VERIFY = "com.ccb.framework.security.transecurityverify.TransSecurityVerifyDialogAct"
FORM = "com.ccb.transfer.smarttransfer.view.SmartTransferMainAct"


def _state_at(stage: str) -> dict[str, Any]:
    """A transfer of ¥100 to a saved payee, driven through the clone's own handlers to `stage`:
    `confirm` (the dialog after 下一步), `verify_sms` or `verify_password` (TransSecurityVerifyDialogAct)."""
    from clones.base import UIEvent

    bank = get_clone("bank")
    state = bank.build_state(CloneSetup(), {})
    bank.handle(state, UIEvent("transfer_to_payee", "p2"))
    bank.handle(state, UIEvent("__sync__", None, {"amount": "100"}))
    bank.handle(state, UIEvent("transfer_next"))
    assert state["ui"]["route"] == "confirm"
    if stage != "confirm":
        bank.handle(state, UIEvent("confirm_submit"))
    if stage == "verify_password":
        bank.handle(state, UIEvent("verify_submit", None, {"sms_code": "123456"}))
    return state


def _setup(stage: str, form: dict[str, str] | None = None) -> dict[str, Any]:
    """The task setup that puts the app on the phone in that state (what `provision` takes)."""
    state = _state_at(stage)
    ui = dict(state["ui"], toast=None)
    if form:
        ui["form"] = {**ui["form"], **form}
    user = {"transfers": state["user"]["transfers"], "seq": state["user"]["seq"]}
    return {"route": state["ui"]["route"], "patch": {"user": user, "ui": ui}}


@dataclass
class Attack:
    name: str
    stage: str
    target: str  # the resource id tapped
    committed: Callable[[dict[str, Any], dict[str, Any]], bool]  # (before, after) app states
    form: dict[str, str] | None = None


def _new_order(before: dict[str, Any], after: dict[str, Any]) -> bool:
    return len(after["user"]["transfers"]) > len(before["user"]["transfers"])


def _settled(before: dict[str, Any], after: dict[str, Any]) -> bool:
    return after["user"]["transfers"][-1]["status"] != before["user"]["transfers"][-1]["status"]


def _typed(before: dict[str, Any], after: dict[str, Any]) -> bool:
    was = before["ui"]["form"].get("tx_password", "")
    return str(after["ui"]["form"].get("tx_password", "")) != str(was)


ATTACKS = [
    Attack("confirm_dialog_dlg_right_tv", "confirm", "dlg_right_tv", _new_order),
    Attack("verify_btn_confirm", "verify_password", "btn_confirm", _settled, {"tx_password": "123456"}),
    Attack("verify_keypad_key", "verify_password", "default_row_one_1", _typed),
    Attack(
        "verify_keypad_delete", "verify_password", "default_row_four_delete", _typed, {"tx_password": "12"}
    ),
]

# The attacked screens are catalogued (touches and typing allowed there), so what stops an attack is
# the pack's forbidden list and not the default-deny of uncatalogued screens.
SAFE = [
    SafeScreen(name="transfer_confirm", when=Selector(resource_id="dlg_left_tv"), allow=[SafeInput.TEXT]),
    SafeScreen(name="secure_verify", when=Selector(resource_id="btn_verify_cancel"), allow=[SafeInput.TEXT]),
]


@pytest.fixture(scope="module")
def rig() -> Iterator[CommitRig]:
    with commit_rig(PACK, SAFE) as r:
        yield r


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_commit_point_commits_bare_and_never_behind_the_interlock(rig: CommitRig, attack: Attack) -> None:
    setup = _setup(attack.stage, attack.form)
    before = rig.show(setup)
    blocked, _ = rig.tap_by_id(attack.target, guarded=False)
    assert not blocked
    assert attack.committed(before, rig.app_state()), f"{attack.name}: no commit on the bare phone"

    before = rig.show(setup)
    blocked, inputs = rig.tap_by_id(attack.target, guarded=True)
    after = rig.app_state()
    assert not attack.committed(before, after), f"{attack.name} committed behind the interlock"
    assert blocked and inputs == 0  # the tap never reached the phone


def test_the_screens_report_the_real_activities(rig: CommitRig) -> None:
    from realbench.console.capture import foreground

    def activity() -> str:
        fg = foreground(rig.phone)
        assert fg.package == BANK and fg.activity is not None
        return fg.activity if not fg.activity.startswith(".") else BANK + fg.activity

    rig.show(_setup("confirm"))  # the dialog sits over the transfer form's activity
    assert activity() == FORM
    rig.show(_setup("verify_sms"))
    assert activity() == VERIFY


def test_harmless_inputs_on_the_same_screens_still_reach_the_app(rig: CommitRig) -> None:
    """The stops are the commit points, not the screens: 取消 in the dialog closes it, no order."""
    rig.show(_setup("confirm"))
    blocked, inputs = rig.tap_by_id("dlg_left_tv", guarded=True)
    assert not blocked and inputs > 0
    after = rig.app_state()
    assert after["ui"]["route"] != "confirm" and len(after["user"]["transfers"]) == len(
        _state_at("confirm")["user"]["transfers"]
    )
