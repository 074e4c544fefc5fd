"""Phone targets on the real task packs, on virtual phones showing the clones (Chromium).

`real`: the stand-in app on the phone; the golden plan reaches the commit boundary and the commit
tap never reaches the phone (checked in the phone's own input log). `clone-on-phone`: the clone
in the phone's browser, verified from the clone server's state.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devices.clone_browser import DEFAULT_CHROMIUM
from devices.farm.rig_targets import targets_from_rig
from devices.rig import PhoneSpec, parse_rig
from devices.virtual import VirtualPhoneHost
from realbench.episode import run_episode
from realbench.golden import GoldenAgent
from realbench.outcome import Outcome
from realbench.taskpack import load_pack

pytestmark = [
    pytest.mark.farm,
    pytest.mark.browser,
    # the one condition this tier may skip on; any other start-up failure is a failure
    pytest.mark.skipif(not Path(DEFAULT_CHROMIUM).exists(), reason="clone screens need Debian's Chromium"),
]

ROOT = Path(__file__).resolve().parents[1]
BANK_PACK = ROOT / "taskpacks" / "bank" / "pack.yaml"


@pytest.fixture(scope="module")
def clone_phone(adb_server_port: int) -> Iterator[tuple[VirtualPhoneHost, str]]:
    with VirtualPhoneHost() as host:
        (info,) = host.start(1, screens="clone", drift="none")
        host.adb_connect(adb_server_port)
        yield host, info.serial


def rig_for(serial: str) -> Any:
    return parse_rig(
        {
            "name": "clone-phone",
            "phones": [{"serial": serial, "profile": "generic-1080x2400", "virtual": True}],
        }
    )


def episode(serial: str, kind: str, task_id: str) -> Any:
    pack = load_pack(BANK_PACK)
    task = pack.task(task_id)
    with targets_from_rig(
        rig_for(serial),
        pack,
        kind,
        phones=[PhoneSpec(serial=serial, profile="generic-1080x2400", virtual=True)],
    ) as targets:
        target = targets[0]
        instance = task.instantiate(0, target.today(task))
        result = run_episode(instance, target, GoldenAgent())
        target.after_episode(result)
    return result


def test_real_target_stops_before_the_commit(clone_phone: tuple[VirtualPhoneHost, str]) -> None:
    host, serial = clone_phone
    before = len(host.phone(serial).events)
    result = episode(serial, "real", "transfer_saved_payee")
    assert result.outcome is Outcome.BOUNDARY_REACHED, (result.error, [s.error for s in result.steps])
    assert result.device["kind"] == "virtual-phone"
    sent = host.phone(serial).events.events(before)
    assert sent, "the plan's taps never reached the phone"
    assert all(e.node is None or e.node.text not in ("确认", "确定") for e in sent)


def test_clone_on_phone_is_verified_from_the_server(clone_phone: tuple[VirtualPhoneHost, str]) -> None:
    _, serial = clone_phone
    result = episode(serial, "clone-on-phone", "transfer_saved_payee")
    assert result.outcome is Outcome.SUCCESS, (result.error, result.verdicts)
    assert result.verdicts and result.verdicts[0].success
