"""A report names element-policy checkpoints for what their cards say they are (docs/study.md): the
description each step of a `policy:` agent records reaches the note above the summary and every
table that names a model, without calling them synthetic or the result unreal."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from analysis.report import ReportInputs, build_report, model_label, policy_descriptions

BASE = "policy:element@aaaaaaaaaaaa"
TRAINED = "policy:element@bbbbbbbbbbbb"
WHAT = {
    BASE: "a small element policy, untrained (heuristic start, random weights, seed 0)",
    TRAINED: "a small element policy trained by RL on the clone, 192 updates, seed 0",
}


def _episodes(n_tasks: int = 12, runs: int = 2) -> pd.DataFrame:
    rows = []
    for t in range(n_tasks):
        for env, serial in (("clone", "clone-0"), ("real", "R58M1234")):
            for model in (BASE, TRAINED):
                ok = model == TRAINED and t % 3 != 0 or model == BASE and t % 4 == 0
                for r in range(runs):
                    key = f"{env}/{model}/t{t}/{r}"
                    rows.append(
                        {
                            "key": key,
                            "episode_id": key,
                            "task": f"t{t}",
                            "model": model,
                            "env": env,
                            "success": ok,
                            "scored": True,
                            "outcome": "success" if ok else "failure",
                            "device_kind": "headless-clone" if env == "clone" else "usb",
                            "device_serial": serial,
                            "app": "train_ticketing",
                        }
                    )
    return pd.DataFrame(rows)


def _inputs(tmp_path: Path, ep: pd.DataFrame) -> ReportInputs:
    model_of = dict(zip(ep["key"], ep["model"], strict=True))
    return ReportInputs(
        episodes=ep,
        verdicts=pd.DataFrame(
            columns=["key", "episode_id", "source", "name", "success", "abstained", "reason"]
        ),
        steps=lambda key: [
            {"index": 0, "action": {"type": "back"}, "extra": {"policy": WHAT[model_of[key]]}}
        ],
        episode_dir=lambda key: tmp_path,
    )


def test_descriptions_come_from_the_recorded_steps(tmp_path: Path) -> None:
    inputs = _inputs(tmp_path, _episodes())
    assert policy_descriptions(inputs) == WHAT
    assert model_label(TRAINED, WHAT) == f"{TRAINED} [{WHAT[TRAINED]}]"
    assert model_label("synthetic:base", WHAT) == "synthetic:base [synthetic policy]"
    assert model_label("gpt-x", WHAT) == "gpt-x"
    # an agent that records no description is shown by its name alone
    bare = ReportInputs(inputs.episodes, inputs.verdicts, lambda key: [], inputs.episode_dir)
    assert policy_descriptions(bare) == {}


def test_the_report_names_the_policies_everywhere_it_names_a_model(tmp_path: Path) -> None:
    page = build_report(
        _inputs(tmp_path, _episodes()), out=tmp_path / "r.html", base=BASE, trained=TRAINED, resamples=200
    ).read_text(encoding="utf-8")
    assert 'id="policies-note"' in page and "not VLMs" in page
    for what in WHAT.values():
        # the note, the success table, the retention table and the viewer's labels
        assert page.count(what) >= 3, what
    assert 'id="synthetic-banner"' not in page  # a learned policy on a phone is not a synthetic result
