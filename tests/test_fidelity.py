"""Clone fidelity: labels, the pair metrics on hand-made hierarchies, and scores of captures taken
from virtual phones (undrifted and drifted clones behind the real adb server) against the clone."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from analysis.fidelity.captures import ScreenLabel, load_captures
from analysis.fidelity.metrics import (
    colour_layout_distance,
    interactive_elements,
    match_elements,
    match_texts,
    ssim,
    visible_texts,
)
from analysis.fidelity.score import WEIGHTS
from realbench.errors import ConfigError
from realbench.hierarchy import Hierarchy

ROOT = Path(__file__).resolve().parents[1]
W, H = 1080, 2400


def _tree(*nodes: tuple[str, str, bool, str]) -> Hierarchy:
    body = "".join(
        f'<node text="{text}" class="{cls}" clickable="{str(click).lower()}" bounds="{bounds}" />'
        for text, bounds, click, cls in nodes
    )
    return Hierarchy(f'<hierarchy rotation="0"><node bounds="[0,0][{W},{H}]">{body}</node></hierarchy>')


# --- labels ------------------------------------------------------------------------------------


def test_labels_name_route_and_state() -> None:
    plain = ScreenLabel.parse("train_ticketing/home")
    assert (plain.clone, plain.route, plain.task, plain.steps) == ("train_ticketing", "home", None, 0)
    task = ScreenLabel.parse("bank/transfer_confirm?task=t1&steps=6&seed=2")
    assert (task.clone, task.route, task.task, task.steps, task.seed) == (
        "bank",
        "transfer_confirm",
        "t1",
        6,
        2,
    )
    assert ScreenLabel.parse(str(task)) == task
    assert ScreenLabel.parse("orders_upcoming?scenario=with_orders").scenario == "with_orders"
    for bad in ("", "home?steps=3", "home?colour=red", "home?task=a&steps=-1", "http://x/home"):
        with pytest.raises(ConfigError):
            ScreenLabel.parse(bad)


# --- metrics -----------------------------------------------------------------------------------


def test_text_recall_precision_and_relabels_by_place() -> None:
    real = _tree(
        ("搜索车票", "[100,500][500,600]", True, "android.widget.Button"),
        ("北京", "[100,200][300,260]", False, "android.widget.TextView"),
        ("离屏", "[100,2600][300,2700]", False, "android.widget.TextView"),  # below the screen
    )
    clone = _tree(
        ("查询车票", "[100,500][500,600]", True, "android.widget.Button"),
        ("北京", "[100,200][300,260]", False, "android.widget.TextView"),
        ("上海", "[600,200][900,260]", False, "android.widget.TextView"),
    )
    m = match_texts(visible_texts(real, W, H), visible_texts(clone, W, H))
    assert m.recall == pytest.approx(1 / 2) and m.precision == pytest.approx(1 / 3)
    assert m.missing == ["搜索车票"] and sorted(m.extra) == ["上海", "查询车票"]
    assert [(r.real, r.clone) for r in m.relabels] == [("搜索车票", "查询车票")]


def test_only_the_apps_own_nodes_count_on_a_capture() -> None:
    tree = Hierarchy(
        f'<hierarchy rotation="0"><node bounds="[0,0][{W},{H}]" package="com.MobileTicket">'
        '<node text="09:41" package="com.android.systemui" bounds="[0,0][200,80]" />'
        '<node text="查询车票" package="com.MobileTicket" clickable="true" bounds="[100,500][500,600]" />'
        "</node></hierarchy>"
    )
    assert [t.text for t in visible_texts(tree, W, H, "com.MobileTicket")] == ["查询车票"]
    assert [t.text for t in visible_texts(tree, W, H)] == ["09:41", "查询车票"]
    assert [e.label for e in interactive_elements(tree, W, H, "com.MobileTicket")] == ["查询车票"]


def test_elements_match_by_label_and_role_with_bounds_iou() -> None:
    real = _tree(
        ("查询车票", "[100,500][500,600]", True, "android.widget.Button"),
        ("出发地", "[100,700][500,800]", True, "android.widget.EditText"),
    )
    same = match_elements(interactive_elements(real, W, H), interactive_elements(real, W, H))
    assert same.score == 1.0 and not same.missing and not same.extra
    shifted = _tree(
        ("查询车票", "[100,550][500,650]", True, "android.widget.Button"),  # moved down by half its height
        ("出发地", "[100,700][500,800]", True, "android.widget.Button"),  # same label, another role
    )
    m = match_elements(interactive_elements(real, W, H), interactive_elements(shifted, W, H))
    assert [p.real.label for p in m.pairs] == ["查询车票"]
    assert m.pairs[0].iou == pytest.approx(50 / 150)
    assert m.score == pytest.approx(2 * (50 / 150) / 4)
    assert [e.label for e in m.missing] == ["出发地"] and [e.label for e in m.extra] == ["出发地"]


def test_appearance_metrics() -> None:
    rows = np.full((800, 360, 3), 255, np.uint8)
    rows[(np.arange(800) // 20) % 2 == 0] = 0  # black and white bands across
    cols = np.full((800, 360, 3), 255, np.uint8)
    cols[:, (np.arange(360) // 20) % 2 == 0] = 0  # the same bands, upright
    assert ssim(rows, rows) == pytest.approx(1.0)
    assert colour_layout_distance(rows, rows) == pytest.approx(0.0)
    assert ssim(rows, cols) < 0.5
    red = np.zeros_like(rows)
    red[..., 2] = 255
    assert colour_layout_distance(rows, red) > 0.5 > colour_layout_distance(rows, cols)
    assert WEIGHTS.combine(1, 1, 1, 0) == pytest.approx(1.0)
    assert WEIGHTS.combine(0, 0, 0, 1) == pytest.approx(0.0)


# --- virtual-phone captures against the clone ----------------------------------------------------

farm = [
    pytest.mark.farm,
    pytest.mark.browser,
    pytest.mark.skipif(shutil.which("adb") is None, reason="needs Debian's adb"),
    pytest.mark.skipif(
        not Path(os.environ.get("REALBENCH_CHROMIUM", "/usr/bin/chromium")).exists(), reason="needs Chromium"
    ),
]
DRIFTS = ("none", "relabel", "layout", "ads")
TICKET = "com.MobileTicket"


def on_phones(fn: Any) -> Any:
    for mark in farm:
        fn = mark(fn)
    return fn


HOME = "train_ticketing/home"
ORDERS = "train_ticketing/orders_upcoming?scenario=with_orders"


@pytest.fixture(scope="module")
def captured(adb_server_port: int, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One folder of captures per drift profile, each taken from its own virtual phone through
    uiautomator2 (the capture code the lab uses on real phones)."""
    pytest.importorskip("uiautomator2")
    from devices.phone import PhoneDevice
    from devices.virtual import VirtualPhoneHost
    from devices.virtual.control import PhoneControl
    from realbench.console.capture import capture_screen

    root = tmp_path_factory.mktemp("captures")
    with VirtualPhoneHost() as host:
        infos = host.start(len(DRIFTS), screens="clone", drift=list(DRIFTS))
        host.adb_connect(adb_server_port)
        for info, drift in zip(infos, DRIFTS, strict=True):
            phone = PhoneDevice(info.serial, virtual=True)
            try:
                phone.start_app(TICKET)
                capture_screen(phone, root / drift, label=HOME)
                if drift == "none":
                    PhoneControl(info.control_url).provision(
                        TICKET, {"data": {"scenario": "with_orders"}, "route": "orders_upcoming"}, {}
                    )
                    capture_screen(phone, root / drift, label=ORDERS)
            finally:
                phone.close()
    yield root


@pytest.fixture(scope="module")
def scores(captured: Path) -> dict[str, dict[str, dict[str, object]]]:
    """Scores per drift and label, from the in-process renderer."""
    from analysis.fidelity.measure import measure
    from devices.clone_render import CloneScreenRenderer
    from realbench.taskpack import load_pack

    pack = load_pack(ROOT / "taskpacks" / "train_ticketing")
    out: dict[str, dict[str, dict[str, object]]] = {}
    with CloneScreenRenderer(pack) as renderer:
        for drift in DRIFTS:
            result = measure(
                load_captures(captured / drift), renderer, pack=pack.app, clone=pack.clone
            ).result
            out[drift] = {s.label: s.model_dump() for s in result.screens}
    return out


@on_phones
@pytest.mark.parametrize("label", [HOME, ORDERS])
def test_undrifted_clone_scores_at_least_095_against_itself(scores: dict, label: str) -> None:
    s = scores["none"][label]
    assert s["score"] >= 0.95, s
    assert s["text_recall"] == 1.0 and s["text_precision"] == 1.0 and s["element_match"] >= 0.95


@on_phones
def test_relabel_drift_lowers_text_and_names_the_relabelled_texts(scores: dict) -> None:
    from clones.base import get_clone

    plain, s = scores["none"][HOME], scores["relabel"][HOME]
    assert s["text_recall"] < plain["text_recall"] - 0.05 and s["text_precision"] < plain["text_precision"]
    assert s["score"] < plain["score"]
    # the controls did not move: what matched sits where it did
    assert s["element_iou"] >= 0.95
    relabels = getattr(get_clone("train_ticketing"), "drift_relabels", {})
    named = {(r["real"], r["clone"]) for r in s["relabelled"]}
    assert ("搜索车票", "查询车票") in named
    assert named and all(relabels.get(clone) == real for real, clone in named)


@on_phones
def test_layout_drift_lowers_element_overlap_and_ssim_not_text(scores: dict) -> None:
    plain, s = scores["none"][HOME], scores["layout"][HOME]
    assert s["text_recall"] >= 0.9  # the same words, lower down (a few may leave the screen)
    assert s["element_iou"] < 0.6 and s["element_match"] < plain["element_match"] - 0.3
    assert s["ssim"] < plain["ssim"] - 0.1
    assert s["relabelled"] == []


@on_phones
def test_ads_drift_lowers_appearance_and_text(scores: dict) -> None:
    plain, s = scores["none"][HOME], scores["ads"][HOME]
    assert s["ssim"] < plain["ssim"] - 0.2
    assert s["colour_distance"] > plain["colour_distance"] + 0.2
    assert s["text_recall"] < 0.5 and any("跳过" in t for t in s["missing_texts"])
    assert s["score"] < 0.5


@on_phones
def test_fidelity_command_writes_json_and_a_report_naming_relabels(captured: Path, tmp_path: Path) -> None:
    report = tmp_path / "report.html"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "realbench",
            "fidelity",
            "--pack",
            str(ROOT / "taskpacks" / "train_ticketing"),
            "--captures",
            str(captured / "relabel"),
            "--json",
            "--out",
            str(report),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert set(data) >= {"screens", "score", "apps", "weights"}
    [screen] = data["screens"]
    assert {"label", "text_recall", "text_precision", "element_match", "ssim", "score"} <= set(screen)
    assert data["score"] == screen["score"] and screen["label"] == HOME
    page = report.read_text(encoding="utf-8")
    assert "搜索车票 → 查询车票" in page and page.count("data:image/jpeg") == 2


@on_phones
def test_unlabelled_captures_are_skipped(captured: Path, tmp_path: Path) -> None:
    folder = tmp_path / "caps"
    shutil.copytree(captured / "none", folder)
    first = sorted(folder.iterdir())[0]
    meta = json.loads((first / "capture.json").read_text())
    (first / "capture.json").write_text(json.dumps({**meta, "label": None}))
    assert [c.name for c in load_captures(folder)] == [p.name for p in sorted(folder.iterdir())[1:]]
    for rest in sorted(folder.iterdir())[1:]:
        shutil.rmtree(rest)
    with pytest.raises(ConfigError, match="no labelled captures"):
        load_captures(folder)


@on_phones
def test_a_label_whose_route_the_clone_lacks_is_refused(captured: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    shutil.copytree(next((captured / "none").iterdir()), bad / "one")
    meta = json.loads((bad / "one" / "capture.json").read_text())
    (bad / "one" / "capture.json").write_text(json.dumps({**meta, "label": "train_ticketing/nowhere"}))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "realbench",
            "fidelity",
            "--pack",
            str(ROOT / "taskpacks" / "train_ticketing"),
            "--captures",
            str(bad),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode != 0 and "nowhere" in out.stderr + out.stdout


def test_a_task_label_renders_the_state_its_golden_steps_reach() -> None:
    from clones.base import get_clone
    from devices.clone_render import emulation_for, label_state
    from realbench.taskpack import load_pack

    pack = load_pack(ROOT / "taskpacks" / "train_ticketing")
    clone = get_clone("train_ticketing")
    # the plan sets its sampled trip (4 steps), picks the date, searches, then opens the train
    label = ScreenLabel.parse("train_ticketing/train_list?task=book-named-train-first-class&steps=7")
    state = label_state(clone, pack, label)
    task = pack.task("book-named-train-first-class")
    trip = task.instantiate(0, task.clone.setup.clock.date()).params["trip"]
    assert state["ui"]["route"] == "train_list" and state["ui"]["search"]["from"] == trip["from"]
    with pytest.raises(ConfigError, match="order_form"):
        label_state(clone, pack, ScreenLabel.parse("train_list?task=book-named-train-first-class&steps=11"))
    with pytest.raises(ConfigError, match="has no route"):
        label_state(clone, pack, ScreenLabel.parse("nowhere"))
    assert label_state(clone, pack, ScreenLabel.parse("orders_upcoming?scenario=with_orders"))["user"][
        "orders"
    ]
    # the page is exactly the capture's pixel size
    for width, height in ((1080, 2400), (1080, 2340), (720, 1600), (1440, 3200)):
        assert emulation_for(width, height).pixel_size == (width, height)
