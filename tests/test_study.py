"""The whole study end to end on a few tasks: headless clone runs, selection with the replay screen,
virtual phones behind the real adb server, checks and the synthetic judge, retention, the report."""

import json
import shutil
from pathlib import Path

import pytest

from analysis.tables import StoreSet, resolve_outcomes
from realbench.outcome import VerdictSource
from realbench.store import RunStore
from realbench.study import Study, StudyConfig
from realbench.taskpack import load_pack

pytestmark = [pytest.mark.browser, pytest.mark.farm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    pack = load_pack(ROOT / "taskpacks" / "train_ticketing")
    lookups = [t.id for t in pack.tasks if t.answer.type.value != "none"][:1]
    # Short booking plans (no swipes or scrolls); the synthetic policy's stray swipes still put
    # swipes on both sides, and the reproducibility test below holds with them because a swipe's
    # touches carry their intended timestamps (tests/test_swipe_determinism.py).
    bookings = [
        t.id
        for t in pack.tasks
        if t.real.boundary and t.difficulty <= 2 and not any(s.scroll_to or s.swipe for s in t.golden)
    ][:1]
    out = tmp_path_factory.mktemp("study")
    # One task of each kind (an answer, a booking that ends at its commit boundary) is every path
    # of every stage; the study runs twice (the same-seed test), so a task more costs its episodes
    # twice. Two phones and two clone pages carry the 4 phone, 8 clone and 4 replay episodes:
    # every phone or page more is start-up work with nothing to run.
    config = StudyConfig(
        out=out,
        tasks=lookups + bookings,
        clone_repeats=2,
        real_repeats=1,
        budget_hours=1.0,
        phones=2,
        workers=2,
        replay_workers=2,
        progress=False,
    )
    return Study(config).run()


def test_every_stage_ran_and_wrote_its_files(study):
    names = [s.name.split(" · ")[0] for s in study.stages]
    assert names == ["1", "2", "3", "4", "5", "6"]
    out = study.out
    for path in ("clone/index.sqlite", "real/index.sqlite", "signal.json", "report.html", "study.json"):
        assert (out / path).exists(), path
    signal = json.loads((out / "signal.json").read_text())
    assert signal["kind"] == "realbench-signal-tasks" and signal["tasks"]
    recorded = json.loads((out / "study.json").read_text())
    assert [s["name"] for s in recorded["stages"]] == [s.name for s in study.stages]


def test_phone_runs_are_on_virtual_phones_with_ground_truth(study):
    store = RunStore(study.out / "real", create=False)
    frame = store.episodes_frame()
    assert set(frame["device_kind"]) == {"virtual-phone"}
    assert set(frame["env"]) == {"real"}
    scored = frame[frame["scored"]]
    assert len(scored) > 0
    for eid in scored["episode_id"]:
        sources = {(v.source, v.name) for v in store.verdicts(eid)}
        assert (VerdictSource.VERIFIER, "virtual-phone-truth") in sources
        assert (VerdictSource.JUDGE, "synthetic:judge") in sources
    # commit taps are withheld on the phones: boundary tasks end at the boundary, never beyond
    boundary = scored[scored["end_reason"] == "boundary"]
    for eid in boundary["episode_id"]:
        assert store.steps(eid)[-1]["boundary"]


def test_report_labels_what_is_synthetic_and_virtual(study):
    html = (study.out / "report.html").read_text(encoding="utf-8")
    assert "synthetic:base" in html and "synthetic:trained" in html
    assert "virtual" in html.lower()
    assert "http://" not in html.replace("http://www.w3.org", "")  # self-contained


def test_rerun_resumes_without_new_episodes(study):
    stores = ("clone", "real")
    before = {p: len(RunStore(study.out / p, create=False).episodes_frame()) for p in stores}
    tasks = sorted(set(RunStore(study.out / "clone", create=False).episodes_frame()["task"]))
    config = StudyConfig(
        out=study.out,
        tasks=tasks,
        clone_repeats=2,
        real_repeats=1,
        budget_hours=1.0,
        phones=2,
        workers=2,
        replay_workers=2,
        progress=False,
    )
    Study(config).run()
    after = {p: len(RunStore(study.out / p, create=False).episodes_frame()) for p in stores}
    assert after == before


@pytest.mark.timeout(1200)  # a second whole study, on a loaded machine
def test_same_seed_gives_the_same_study(study, tmp_path_factory):
    """Episodes land on different virtual phones when the rig has 3 phones instead of 2; an
    episode's drift follows the episode, so the selection, the outcomes and the analysis are the
    same. The clone store is carried over (its runs resume with nothing new to do): what is tested
    is everything from the selection on."""
    tasks = sorted(set(RunStore(study.out / "clone", create=False).episodes_frame()["task"]))
    again_out = tmp_path_factory.mktemp("study-again")
    shutil.copytree(study.out / "clone", again_out / "clone")
    config = StudyConfig(
        out=again_out,
        tasks=tasks,
        clone_repeats=2,
        real_repeats=1,
        budget_hours=1.0,
        phones=3,
        workers=2,
        replay_workers=2,
        progress=False,
    )
    again = Study(config).run()

    def outcomes(root: Path) -> dict[tuple[str, str, str], tuple[object, ...]]:
        """Per scored episode: how it ended, its actions and its resolved success (truth, checks,
        judge). Keyed without the attempt number: an attempt the infrastructure aborted (a phone call
        that timed out on a loaded machine) is run again, so one study may score attempt 1 where
        the other scores attempt 0 of the same episode. Steps are counted without the plan's waits:
        how many waits a screen that ends by itself takes (12306's order queue, a few seconds of
        wall time) depends on the machine's load, not on the seed."""
        with StoreSet([root / "real"]) as ss:
            frame = resolve_outcomes(ss.episodes(), ss.verdicts(), "synthetic:judge")
        store = RunStore(root / "real", create=False)
        acted = [
            sum(1 for step in store.steps(e) if (step.get("action") or {}).get("type") != "wait")
            for e in frame["episode_id"]
        ]
        ids = frame["episode_id"].str.split("/", n=1).str[1].str.rsplit("/", n=1).str[0]
        keys = list(zip(frame["task"], frame["model"], ids, strict=True))
        assert len(set(keys)) == len(keys), "one scored attempt per episode"
        values = zip(frame["outcome"], acted, frame["success"], strict=True)
        return dict(zip(keys, values, strict=True))

    clone_episodes = RunStore(again.out / "clone", create=False).episodes_frame()
    assert len(clone_episodes) == len(RunStore(study.out / "clone", create=False).episodes_frame())
    assert (again.out / "signal.json").read_text() == (study.out / "signal.json").read_text()
    assert outcomes(again.out) == outcomes(study.out)
    first = json.loads((study.out / "retention.json").read_text())
    second = json.loads((again.out / "retention.json").read_text())
    assert first["estimand"] == second["estimand"]
    assert first["estimands"] == second["estimands"]


@pytest.mark.timeout(600)
def test_learned_policies_run_by_path_and_are_recorded_by_name(tmp_path):
    """The demo's policies are checkpoints: the clone stage runs them by path and the store records
    them by the name the analysis asks for (a mismatch would leave the study with no episodes of
    either model)."""
    from realbench.study import learned_policies

    cfg = learned_policies(StudyConfig(out=tmp_path / "s", clone_repeats=1, workers=1, progress=False))
    cfg.tasks = cfg.tasks[:1]
    note = Study(cfg).clone_runs()
    frame = RunStore(tmp_path / "s" / "clone", create=False).episodes_frame()
    assert set(frame["model"]) == {cfg.base, cfg.trained}
    assert cfg.base in note and cfg.trained in note
