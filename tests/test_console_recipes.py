"""The recorder's writes: one task's recipe changes only that task's lines of real.yaml, and Stop
keeps an unwritten recording unless the operator discards it (no phone needed)."""

from __future__ import annotations

import difflib
import shutil
from pathlib import Path

import pytest
import yaml

from realbench.console.recorder import Phase, RecordedStep, Recorder, Recording, StepKind, UnwrittenRecording
from realbench.recipe_file import write_task_recipe
from realbench.taskpack import load_pack

ROOT = Path(__file__).resolve().parents[1]
TASK = "lookup-passenger-count"
RECIPE = {
    "setup": [{"do": "launch"}],
    "golden": [{"tap": {"text": "我的"}}, {"type": {"text": "北京", "into": {"resource_id": "search"}}}],
}


def _changed_lines(before: str, after: str) -> list[int]:
    """Line numbers (1-based, of `before`) that the edit replaced or deleted, plus insertions."""
    changed: list[int] = []
    matcher = difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines(), autojunk=False)
    for tag, i1, i2, _j1, _j2 in matcher.get_opcodes():
        if tag != "equal":
            changed.extend(range(i1 + 1, max(i2, i1 + 1) + 1))
    return changed


def _task_span(text: str, task: str) -> tuple[int, int]:
    """First and last line (1-based) of a task's entry under `tasks:` (two-space keys)."""
    lines = text.splitlines()
    start = lines.index(f"  {task}:") + 1
    end = next(
        (i for i in range(start, len(lines)) if lines[i].startswith("  ") and lines[i][2] != " "), len(lines)
    )
    return start, end


def _recorder(tmp_path: Path, pack: Path) -> Recorder:
    rec = Recorder.__new__(Recorder)  # the recipe logic needs no phone
    rec.data_dir, rec._recordings = tmp_path / "data", {}
    rec.packs = {pack.resolve(): load_pack(pack)}
    import threading

    rec._lock = threading.Lock()
    return rec


def test_one_task_recipe_write_changes_only_that_task_lines(tmp_path: Path) -> None:
    real = tmp_path / "real.yaml"
    shutil.copy(ROOT / "taskpacks" / "train_ticketing" / "real.yaml", real)
    before = real.read_text(encoding="utf-8")
    write_task_recipe(real, TASK, RECIPE, app="train_ticketing")
    after = real.read_text(encoding="utf-8")
    first, last = _task_span(before, TASK)
    changed = _changed_lines(before, after)
    assert changed and all(first <= n <= last for n in changed), (first, last, changed)
    # (the old whole-file rewrap changed over a thousand lines of this file)
    old, new = yaml.safe_load(before), yaml.safe_load(after)
    assert new["tasks"][TASK]["golden"] == RECIPE["golden"] and new["tasks"][TASK]["setup"] == RECIPE["setup"]
    # the task's other keys and every other task are as they were, and so are the comments
    assert {k: v for k, v in new["tasks"][TASK].items() if k not in RECIPE} == {
        k: v for k, v in old["tasks"][TASK].items() if k not in RECIPE
    }
    assert {t: v for t, v in new["tasks"].items() if t != TASK} == {
        t: v for t, v in old["tasks"].items() if t != TASK
    }
    assert [ln for ln in after.splitlines() if ln.lstrip().startswith("#")] == [
        ln for ln in before.splitlines() if ln.lstrip().startswith("#")
    ]
    # a task the file does not have yet is appended to `tasks:`, touching nothing else
    write_task_recipe(real, "brand-new", RECIPE, app="train_ticketing")
    again = real.read_text(encoding="utf-8")
    assert again.startswith(after.rstrip("\n")) and yaml.safe_load(again)["tasks"]["brand-new"] == RECIPE


def test_a_comment_before_the_next_task_is_kept_in_place(tmp_path: Path) -> None:
    real = tmp_path / "real.yaml"
    real.write_text(
        "# header\napp: x\ntasks:\n  a:\n    setup: []  # why empty\n    golden:\n    - tap: {text: 'A'}\n"
        "  # --- b is next\n  b:\n    golden: []\n",
        encoding="utf-8",
    )
    write_task_recipe(real, "a", {"golden": [{"tap": {"text": "B"}}]}, app="x")
    text = real.read_text(encoding="utf-8")
    assert "  # --- b is next\n  b:\n    golden: []\n" in text and "setup: []  # why empty" in text
    assert yaml.safe_load(text)["tasks"]["a"] == {"setup": [], "golden": [{"tap": {"text": "B"}}]}


def test_the_recorder_writes_through_the_round_trip_edit(tmp_path: Path) -> None:
    pack = tmp_path / "train_ticketing"
    shutil.copytree(ROOT / "taskpacks" / "train_ticketing", pack)
    before = (pack / "real.yaml").read_text(encoding="utf-8")
    rec = _recorder(tmp_path, pack)
    rec._recordings["s"] = Recording(
        pack=pack.resolve(),
        task=TASK,
        steps=[
            RecordedStep(StepKind.LAUNCH, Phase.SETUP),
            RecordedStep(StepKind.TAP, Phase.GOLDEN, {"text": "我的"}, "text"),
        ],
        unwritten=True,
    )
    written = rec.write("s")
    after = (pack / "real.yaml").read_text(encoding="utf-8")
    first, last = _task_span(before, TASK)
    assert all(first <= n <= last for n in _changed_lines(before, after))
    assert Path(written["backup"]).read_text(encoding="utf-8") == before
    assert next(t for t in load_pack(pack).tasks if t.id == TASK).real.golden


def test_stop_keeps_an_unwritten_recording_until_discarded(tmp_path: Path) -> None:
    pack = tmp_path / "train_ticketing"
    shutil.copytree(ROOT / "taskpacks" / "train_ticketing", pack)
    rec = _recorder(tmp_path, pack)
    recording = Recording(pack=pack.resolve(), task=TASK)
    rec._recordings["s"] = recording
    rec.stop("s")  # nothing recorded: nothing to lose
    assert rec.recording("s") is None
    rec._recordings["s"] = recording
    rec.opened("s", "com.MobileTicket")
    with pytest.raises(UnwrittenRecording, match="1 unwritten steps"):
        rec.stop("s")
    assert rec.recording("s") is recording and len(recording.steps) == 1  # kept, steps intact
    rec.stop("s", discard=True)
    assert rec.recording("s") is None
    # once written, Stop needs no question
    rec._recordings["s"] = recording
    recording.steps.append(RecordedStep(StepKind.TAP, Phase.GOLDEN, {"text": "我的"}, "text"))
    rec.mark("s", 0, Phase.SETUP)
    rec.write("s")
    rec.stop("s")
    assert rec.recording("s") is None
