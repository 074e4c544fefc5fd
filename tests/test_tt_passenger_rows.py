"""The 12306 clone's passenger management rows read as the real app's do, in the hierarchy the page
runtime dumps in Chromium: CheckBoxes whose text starts `姓名，类型，` (docs/real-apps.md, the
ordering script's passenger management), so a recipe's `text_contains: 张强，` finds the row."""

from __future__ import annotations

import re

import httpx
import pytest

from clones.base import get_clone
from devices.clone_device import CloneDevice
from realbench.hierarchy import Hierarchy

pytestmark = pytest.mark.browser

ROW = re.compile(r"^[^\s，]+，[^\s，]+，")


def test_passenger_rows_read_name_comma_type_comma(clone_server, browser_pool):
    device = CloneDevice(browser_pool, clone_server.url, get_clone("train_ticketing"))
    try:
        sid = httpx.post(
            f"{clone_server.url}/api/sessions",
            json={"clone": "train_ticketing", "setup": {"route": "passengers"}},
        ).json()["session"]
        device.open(sid)
        tree = Hierarchy(device.observe().hierarchy)
    finally:
        device.close()
    rows = [n.text for n in tree.nodes if n.class_name == "android.widget.CheckBox"]
    assert len(rows) >= 2, rows
    # the flex row's items, each dumped apart, used to join as `张强 ， 学生 ，…`
    assert all(ROW.match(t) for t in rows), rows
    assert any(t.startswith("张强，") for t in rows), rows
