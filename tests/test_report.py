"""The HTML report: self-contained, labels synthetic data, survives missing data, and its replay
viewer works in headless Chromium."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from analysis.report import ReportInputs, build_report
from realbench.cli import app
from tests.analysis_fixtures import BASE, TRAINED, write_store

CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("report")
    clone = write_store(root / "clone", env="clone", n_tasks=4, repeats=2, seed=3)
    real = write_store(root / "real", env="real", n_tasks=4, repeats=2, seed=4, label=True, abort_every=6)
    out = root / "report.html"
    result = CliRunner().invoke(
        app,
        [
            "report",
            str(clone),
            str(real),
            "--out",
            str(out),
            "--base",
            BASE,
            "--trained",
            TRAINED,
            "--resamples",
            "500",
        ],
    )
    assert result.exit_code == 0, (result.output, result.exception)
    return out


def test_report_is_self_contained_and_labelled(report: Path):
    page = report.read_text(encoding="utf-8")
    # Offline: no external scripts, styles or images.
    assert not re.search(r'(src|href)="(https?:)?//', page)
    assert page.count('<img class="plot"') >= 6
    assert 'id="synthetic-banner"' in page
    assert "synthetic:base [synthetic policy]" in page
    assert "[virtual phone]" in page
    assert "<td>real [virtual phone]</td>" in page  # the retention gains table names the device side
    for section in ("success", "paired", "retention", "strata", "audit", "health", "viewer"):
        assert f'id="{section}"' in page
    assert "MobileGym" in page and "published" in page and "SPA-Bench" in page and "MAI-Gym" in page
    assert "No signal-task list given" in page  # that section has no data and says so
    assert "Fieller" in page and "BCa" in page


def test_report_without_data_says_so(tmp_path: Path):
    empty = ReportInputs(
        episodes=pd.DataFrame(columns=["key", "episode_id", "task", "model", "env", "success", "scored"]),
        verdicts=pd.DataFrame(
            columns=["key", "episode_id", "source", "name", "success", "abstained", "reason"]
        ),
        steps=lambda key: [],
        episode_dir=lambda key: tmp_path,
    )
    out = build_report(empty, out=tmp_path / "r.html", resamples=0)
    page = out.read_text(encoding="utf-8")
    assert page.count('class="empty"') >= 6
    assert "No episodes to replay." in page
    assert 'id="synthetic-banner"' not in page


@pytest.mark.browser
def test_replay_viewer_in_chromium(report: Path, tmp_path: Path):
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium not installed")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        try:
            page = browser.new_page()
            requests: list[str] = []
            page.on("request", lambda r: requests.append(r.url))
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(report.as_uri())
            assert page.locator("#synthetic-banner").is_visible()
            options = page.locator("#task-select option").all_inner_texts()
            assert options == ["task0", "task1", "task2", "task3"]
            models = page.locator("#model-select option").all_inner_texts()
            assert models == [f"{BASE} [synthetic policy]", f"{TRAINED} [synthetic policy]"]
            # The clone episode has a final terminate step the device episode lacks: 4 steps.
            assert page.locator("#step-label").inner_text() == "step 1 / 4"
            assert page.locator("#prev").is_disabled()
            clone = page.locator("#side-clone")
            real = page.locator("#side-real")
            assert "step 0 of task0" in clone.locator(".thought").inner_text()
            assert "click(x=200, y=300)" in clone.locator(".action").inner_text()
            assert clone.locator("img.shot").get_attribute("src").startswith("data:image/jpeg;base64,")
            assert "virtual phone" in real.inner_text()
            assert "verifier" in clone.locator(".verdicts").inner_text()
            assert "judge vlm-judge" in real.locator(".verdicts").inner_text()
            assert "human annotator" in real.locator(".verdicts").inner_text()
            page.click("#next")
            page.click("#next")
            assert page.locator("#step-label").inner_text() == "step 3 / 4"
            assert "click(x=400, y=400)" in clone.locator(".action").inner_text()
            assert "step 2 of task0" in real.locator(".thought").inner_text()
            page.click("#next")
            assert page.locator("#next").is_disabled()
            assert "terminate(status=" in clone.locator(".action").inner_text()
            assert "ended after 3 step(s)" in real.locator(".step-missing").inner_text()
            page.click("#prev")
            assert page.locator("#step-label").inner_text() == "step 3 / 4"
            page.select_option("#task-select", label="task2")
            page.select_option("#model-select", label=f"{TRAINED} [synthetic policy]")
            assert page.locator("#step-label").inner_text() == "step 1 / 4"
            assert f"{TRAINED} on clone: step 0 of task2" in clone.locator(".thought").inner_text()
            page.screenshot(path=str(tmp_path / "viewer.png"), full_page=True)
            assert not errors, errors
            assert all(u.startswith(("file:", "data:")) for u in requests), requests
        finally:
            browser.close()
