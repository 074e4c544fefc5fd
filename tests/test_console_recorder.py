"""The console's recorder on a virtual phone whose apps are the clones (Chromium screens): a recipe
recorded through the phone page is written into a copy of the pack and passes `realbench certify`
on the same phone."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from devices.farm.pool import PhonePool
from devices.rig import load_rig, parse_rig, rig_on_phones
from devices.virtual import VirtualPhoneHost
from realbench.cli import app as cli_app
from realbench.console.command import console_app
from realbench.console.server import serve_in_thread
from realbench.hierarchy import Hierarchy, Selector
from tests.console_support import CHROMIUM, CHROMIUM_ARGS
from tests.farm_support import TICKET

pytestmark = [
    pytest.mark.farm,
    pytest.mark.browser,
    pytest.mark.skipif(shutil.which("adb") is None, reason="needs Debian's adb"),
]

ROOT = Path(__file__).resolve().parents[1]
TASK = "lookup-passenger-count"


def _rig(info: Any) -> dict[str, Any]:
    return rig_on_phones(load_rig(ROOT / "rigs" / "virtual.yaml"), [info], name="recorder-test")


@pytest.fixture(scope="module")
def clone_phone() -> Iterator[tuple[VirtualPhoneHost, Any]]:
    with VirtualPhoneHost() as host:
        (info,) = host.start(1, screens="clone", drift="none")
        host.adb_connect()
        yield host, info


def _certify(rig: Path, pack: Path, out: Path) -> dict[str, Any]:
    result = CliRunner().invoke(
        cli_app,
        ["certify", "--rig", str(rig), "--pack", str(pack), "--tasks", TASK, "--json", "--out", str(out)],
    )
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.output.strip().splitlines()[-1]))


def test_a_recorded_recipe_is_written_and_certifies_on_the_same_phone(
    clone_phone: tuple[VirtualPhoneHost, Any], tmp_path: Path
) -> None:
    sync_api = pytest.importorskip("playwright.sync_api")
    host, info = clone_phone
    pack = tmp_path / "train_ticketing"
    shutil.copytree(ROOT / "taskpacks" / "train_ticketing", pack)
    recipes = yaml.safe_load((pack / "real.yaml").read_text(encoding="utf-8"))
    recipes["tasks"].pop(TASK)  # the task has no real side until it is recorded
    (pack / "real.yaml").write_text(yaml.safe_dump(recipes, allow_unicode=True), encoding="utf-8")
    rig_file = tmp_path / "rig.yaml"
    rig_file.write_text(yaml.safe_dump(_rig(info), allow_unicode=True), encoding="utf-8")
    before = _certify(rig_file, pack, tmp_path / "cert0")
    assert before["certified"] == 0

    pool = PhonePool(parse_rig(_rig(info)), virtual=True, lease_dir=tmp_path / "leases")
    serial = info.serial
    with (
        console_app(rig=None, stores=[], data_dir=tmp_path / "data", pool=pool, packs=[pack]) as app,
        serve_in_thread(app) as url,
        sync_api.sync_playwright() as p,
    ):
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1100})
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(f"{url}/phone/{serial}")
        page.wait_for_function("window.rbFrames >= 1", timeout=60_000)
        page.select_option("#rec-task", TASK)
        page.click("#rec-start button")
        page.wait_for_selector("#rec-body:not([hidden])")
        page.click(f'button[data-app="{TICKET}"]')
        page.wait_for_function(
            "document.querySelectorAll('#rec-steps tbody tr').length === 1", timeout=30_000
        )

        def node_center(selector: Selector, timeout_s: float = 20) -> tuple[float, float]:
            import time

            deadline = time.monotonic() + timeout_s
            while True:
                tree = Hierarchy(httpx.get(f"{url}/api/phones/{serial}/hierarchy", timeout=30).text)
                node = tree.find_one(selector)
                if node is not None:
                    break
                assert time.monotonic() < deadline, f"{selector} never appeared"
                time.sleep(0.3)
            box = page.locator("#screen").bounding_box()
            assert box is not None
            cx, cy = node.bounds.center
            return box["x"] + cx / 1080 * box["width"], box["y"] + cy / 2400 * box["height"]

        def rows() -> int:
            return int(page.evaluate("document.querySelectorAll('#rec-steps tbody tr').length"))

        # a check: the home screen's query button must be there before the plan starts
        page.click("#rec-check")
        page.mouse.click(*node_center(Selector(resource_id="ticket_home_btn_search")))
        page.wait_for_function("document.querySelectorAll('#rec-steps tbody tr').length === 2")
        page.check("input[name=rec-default][value=golden]")
        for sel in (Selector(text="我的"), Selector(text="常用乘车人")):
            n = rows()
            page.mouse.click(*node_center(sel))
            page.wait_for_function(f"document.querySelectorAll('#rec-steps tbody tr').length === {n + 1}")
        page.fill("#rec-regex", r"(\d+)")
        page.click("#rec-answer")
        page.mouse.click(*node_center(Selector(resource_id="passenger_count")))
        page.wait_for_function("document.querySelectorAll('#rec-steps tbody tr').length === 5")
        preview = page.locator("#rec-yaml").inner_text()
        recorded = yaml.safe_load(preview)["tasks"][TASK]
        assert recorded["setup"][0]["do"] == "launch" and recorded["setup"][0]["expect"]
        assert [list(s) for s in recorded["golden"]] == [["tap"], ["tap"], ["answer"]]
        assert recorded["golden"][-1]["answer"]["regex"] == r"(\d+)"
        # Stop with unwritten steps asks first; declining keeps the recording and its steps
        asked: list[str] = []

        def decline(dialog: Any) -> None:
            asked.append(dialog.message)
            dialog.dismiss()

        page.once("dialog", decline)
        page.click("#rec-stop")
        page.wait_for_function("document.getElementById('rec-result').textContent.startsWith('kept')")
        assert asked and "unwritten" in asked[0] and rows() == 5
        page.evaluate("document.getElementById('rec-result').textContent = ''")
        page.click("#rec-write button")
        page.wait_for_function("document.getElementById('rec-result').textContent !== ''", timeout=60_000)
        result = page.locator("#rec-result").inner_text()
        assert result.startswith("written to"), result
        page.click("#rec-stop")  # written: Stop ends it without a question
        page.wait_for_selector("#rec-body", state="hidden")
        assert not errors
        browser.close()
    pool.close()
    assert list(pack.glob("real.yaml.bak-*")), "the previous recipes file is kept"
    written = yaml.safe_load((pack / "real.yaml").read_text(encoding="utf-8"))["tasks"][TASK]
    assert written["golden"] == recorded["golden"]
    after = _certify(rig_file, pack, tmp_path / "cert1")
    row = after["tasks"][0]
    assert after["certified"] == 1, row
