"""The money-moving packs' safe-screen catalogues cover their real recipes (no false block), and
default-deny refuses what they do not cover.

Every input step of every runnable real recipe (setup, the steps around the logged-in probe, the
golden steps before the commit tap) is run browser-free on the clone and must land on a screen the
pack's `real_app.safe_screens` recognises, with the input it needs allowed. A failure names the
task, the step and the screen: after renaming a screen or a marker id, rename it in the catalogue
(`python -m devices.farm.screen_catalogue taskpacks/PACK` prints fresh entries).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from devices.certify_sample import runnable_tasks
from devices.farm.interlock import Interlock
from devices.farm.interlock_policy import InterlockPolicy
from devices.farm.screen_catalogue import suggest, uncatalogued_steps
from devices.rig import load_rig
from realbench.actions import Click
from realbench.hierarchy import Hierarchy
from realbench.taskpack import check_pack, load_pack, parse_pack

ROOT = Path(__file__).resolve().parents[1]
PACKS = ("bank", "train_ticketing")
FIXTURES = {a.app: a.fixture for a in load_rig(ROOT / "rigs" / "virtual.yaml").accounts}


@pytest.mark.slow
@pytest.mark.parametrize("name", PACKS)
def test_every_real_recipe_step_lands_on_a_catalogued_screen(name: str) -> None:
    pack = load_pack(ROOT / "taskpacks" / name)
    assert pack.policy.money_moving and pack.real_app.safe_screens
    fixture = FIXTURES[pack.real_app.package]
    tasks = runnable_tasks(pack, fixture)
    problems = uncatalogued_steps(pack, tasks, fixture)
    # a plan that no longer runs on its clone is the recipe tests' failure, not the catalogue's
    refused = [p for p in problems if "plan does not run on the clone" not in p]
    assert refused == [], "\n".join(refused[:40])
    names = {s.name for s in pack.real_app.safe_screens}
    assert {s.name for s in suggest(pack, tasks[:3], fixture)} <= names | {"(none)"}


def test_default_deny_names_the_screen_and_the_catalogue_lifts_it() -> None:
    pack = load_pack(ROOT / "taskpacks" / "bank")
    lock = Interlock([], list(pack.real_app.forbidden), policy=InterlockPolicy.for_pack(pack))
    home = next(s for s in pack.real_app.safe_screens if s.name == "home")
    marker = home.markers[0].resource_id

    def xml(marker_id: str) -> str:
        return (
            "<hierarchy><node class='android.widget.FrameLayout' package='com.chinamworld.main' "
            "bounds='[0,0][1080,2400]'>"
            f"<node class='android.widget.TextView' resource-id='com.chinamworld.main:id/{marker_id}' "
            "text='x' package='com.chinamworld.main' bounds='[0,100][500,200]'/>"
            "<node class='android.widget.Button' text='查看' clickable='true' "
            "package='com.chinamworld.main' bounds='[0,1000][1080,1100]'/>"
            "</node></hierarchy>"
        )

    def px(x: int, y: int) -> tuple[int, int]:
        return round(x * 1079 / 1000), round(y * 2399 / 1000)

    tap = Click(x=500, y=438)
    assert lock.check(tap, Hierarchy(xml(str(marker))), px, (1080, 2400)) is None
    block = lock.check(tap, Hierarchy(xml("never_catalogued")), px, (1080, 2400))
    assert block is not None and "not in the pack's safe-screen catalogue" in block.reason
    assert "x / 查看" in block.reason  # the screen is named by what it shows


def test_check_pack_refuses_a_foreign_launch_or_deep_link_in_a_money_moving_pack() -> None:
    raw = load_pack(ROOT / "taskpacks" / "bank").model_dump(mode="json", exclude_none=True)
    raw["real_app"]["probe_via"] = [
        {"do": "launch", "package": "com.eg.android.AlipayGphone"},
        {"do": "deep_link", "url": "alipays://platformapi/startapp"},
    ]
    problems = [str(p) for p in check_pack(parse_pack(raw))]
    assert any("com.eg.android.AlipayGphone" in p for p in problems)
    assert any("alipays" in p for p in problems)
    raw["real_app"]["url_schemes"] = ["alipays"]
    raw["real_app"]["probe_via"] = [{"do": "deep_link", "url": "alipays://platformapi/startapp"}]
    assert not [p for p in check_pack(parse_pack(raw)) if "deep link" in str(p)]


def _enter_screen(focused_id: str) -> Hierarchy:
    def field(rid: str) -> str:
        focus = "true" if rid == focused_id else "false"
        return (
            f"<node class='android.widget.EditText' resource-id='com.MobileTicket:id/{rid}' focusable='true' "
            f"focused='{focus}' clickable='true' package='com.MobileTicket' bounds='[0,{300 if rid == 'station_search' else 600}]"
            f"[1080,{400 if rid == 'station_search' else 700}]'/>"
        )

    return Hierarchy(
        "<hierarchy><node class='android.widget.FrameLayout' package='com.MobileTicket' bounds='[0,0][1080,2400]'>"
        f"{field('station_search')}{field('amount')}</node></hierarchy>"
    )


def test_enter_only_into_the_field_the_catalogue_allows_it_for() -> None:
    from realbench.actions import Key, KeyPress, Type

    pack = load_pack(ROOT / "taskpacks" / "train_ticketing")
    lock = Interlock([], list(pack.real_app.forbidden), policy=InterlockPolicy.for_pack(pack))

    def px(x: int, y: int) -> tuple[int, int]:
        return x, y

    enter = KeyPress(key=Key.ENTER)
    assert lock.check(enter, _enter_screen("station_search"), px, (1080, 2400)) is None
    assert lock.check(enter, _enter_screen("amount"), px, (1080, 2400)) is not None
    assert lock.check(Type(text="bj\n"), _enter_screen("amount"), px, (1080, 2400)) is not None
