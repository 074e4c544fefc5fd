"""The run store under abuse: a second writer, a truncated index, deleted or garbage episode folders.

Evidence is read from the folders and the index on disk, not from the store's own report."""

import json
import logging
import os
import time
from pathlib import Path

import pytest

from realbench.errors import StoreError
from realbench.store import RunStore
from realbench.store_lock import StoreLockedError
from tests.store_support import KEYS, RUN, episode_result, fill_store, realbench_cli


def _fill(path: Path) -> None:
    fill_store(path, config={"pack": "p"})
    with RunStore(path, writer="test") as store:
        store.add_label(f"{RUN}/t1/s0/r0/a0", "ann", False, "looked wrong")


def _snapshot(path: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(path)): p.read_bytes()
        for p in sorted((path / "episodes").rglob("*"))
        if p.is_file()
    }


def test_second_writer_fails_fast_naming_the_holder(tmp_path):
    holder = RunStore(tmp_path / "s", writer="realbench run")
    try:
        with pytest.raises(StoreLockedError, match=rf"realbench run.*pid {os.getpid()}"):
            RunStore(tmp_path / "s", writer="realbench judge")
        t0 = time.monotonic()
        done = realbench_cli(
            "run", "--pack", "taskpacks/train_ticketing", "--out", str(tmp_path / "s"), "--no-progress"
        )
        assert done.returncode != 0
        assert f"pid {os.getpid()}" in done.stderr and "Traceback" not in done.stderr
        assert time.monotonic() - t0 < 60
    finally:
        holder.close()
    # released on close: the next writer gets it
    RunStore(tmp_path / "s", writer="realbench judge").close()


def test_truncated_index_is_refused_then_rebuilt(tmp_path):
    store_dir = tmp_path / "s"
    _fill(store_dir)
    before = _snapshot(store_dir)
    (store_dir / "index.sqlite").write_bytes(b"")
    for wal in store_dir.glob("index.sqlite-*"):
        wal.unlink()
    for kwargs in ({"create": False}, {"writer": "realbench run"}):
        with pytest.raises(StoreError, match="disagrees with its episode folders") as err:
            RunStore(store_dir, **kwargs)
        assert "store repair" in (err.value.hint or "")
    assert _snapshot(store_dir) == before, "refusing must not touch an episode folder"
    show = realbench_cli("show", str(store_dir))
    assert show.returncode != 0 and "disagrees" in show.stderr and "no runs" not in show.stdout
    check = realbench_cli("store", "check", str(store_dir), "--json")
    assert check.returncode == 1, check.stderr
    assert len(json.loads(check.stdout)["unknown_folders"]) == len(KEYS)
    repair = realbench_cli("store", "repair", str(store_dir), "--json")
    assert repair.returncode == 0, repair.stderr
    assert len(json.loads(repair.stdout)["restored"]) == len(KEYS)
    assert realbench_cli("store", "check", str(store_dir)).returncode == 0
    with RunStore(store_dir, create=False) as store:
        assert [r["run_id"] for r in store.runs()] == [RUN]
        assert store.runs()[0]["config"] == {"pack": "p"}
        assert set(store.attempts(RUN)) == set(KEYS)
        # the human label written after the episode came back too
        labels = [v for v in store.verdicts(f"{RUN}/t1/s0/r0/a0") if v.source.value == "human"]
        assert [v.success for v in labels] == [False]
        assert store.steps(f"{RUN}/t2/s0/r0/a0")[0]["action"] == {"type": "tap", "x": 1, "y": 2}
    assert _snapshot(store_dir) == before


def test_a_complete_folder_the_index_does_not_know_is_never_overwritten(tmp_path):
    store_dir = tmp_path / "s"
    _fill(store_dir)
    with RunStore(store_dir, writer="test") as store, store._tx() as db:
        db.execute("DELETE FROM episodes WHERE episode_id=?", (f"{RUN}/t2/s0/r0/a0",))
    before = _snapshot(store_dir)
    with pytest.raises(StoreError, match="disagrees"):
        RunStore(store_dir, writer="realbench run")
    store = RunStore(store_dir, writer="test", check=False)
    try:
        with pytest.raises(StoreError, match="refusing to overwrite"):
            store.write_episode(RUN, KEYS[2], 0, "toy", episode_result("t2", 0))
        with pytest.raises(StoreError, match="twice"):
            store.write_episode(RUN, KEYS[0], 0, "toy", episode_result("t1", 0))
    finally:
        store.close()
    assert _snapshot(store_dir) == before


def test_an_interrupted_write_is_still_replaced(tmp_path):
    """A folder renamed into place whose rows were never committed (killed in between) is pending,
    not unknown: the next writer removes it and the attempt is run again."""
    store_dir = tmp_path / "s"
    _fill(store_dir)
    rel = f"episodes/{RUN}/t2-s0-r0-a0".replace("@", "_")
    with RunStore(store_dir, writer="test") as store, store._tx() as db:
        db.execute("DELETE FROM episodes WHERE episode_id=?", (f"{RUN}/t2/s0/r0/a0",))
        db.execute("INSERT INTO pending VALUES (?,?)", (f"{RUN}/t2/s0/r0/a0", rel))
    RunStore(store_dir, create=False).close()  # a reader does not refuse a pending folder
    with RunStore(store_dir, writer="realbench run") as store:
        assert not (store_dir / rel).exists()
        store.write_episode(RUN, KEYS[2], 0, "toy", episode_result("t2", 0))
        assert set(store.attempts(RUN)) == set(KEYS)


def test_deleted_and_garbage_episodes_are_damaged_by_name_and_requeued(tmp_path, caplog):
    from realbench.runner import pending_items, summarize

    store_dir = tmp_path / "s"
    _fill(store_dir)
    gone, garbage = f"{RUN}/t1/s1/r1/a0", f"{RUN}/t2/s0/r0/a0"
    with RunStore(store_dir, create=False) as store:
        import shutil

        shutil.rmtree(store.episode_dir(gone))
        (store.episode_dir(garbage) / "steps.jsonl").write_text('{"index": 0}\n{not json\n')
    with RunStore(store_dir, create=False) as store:
        assert set(store.damaged()) == {gone, garbage}
        with pytest.raises(StoreError, match=garbage.replace("/", ".")):
            store.steps(garbage)
        with pytest.raises(StoreError, match="damaged"):
            store.steps(gone)
        with caplog.at_level(logging.WARNING):
            frame = store.episodes_frame()
        assert set(frame["episode_id"]) == {f"{RUN}/t1/s0/r0/a0"}
        assert "2 damaged episode(s) left out" in caplog.text
        data = summarize(store, RUN).data
        assert data["damaged"] == 2 and data["episodes"] == 1
    show = realbench_cli("show", str(store_dir), "--json")
    assert show.returncode == 0, show.stderr
    assert set(json.loads(show.stdout)["damaged"]) == {gone, garbage}
    repair = realbench_cli("store", "repair", str(store_dir), "--json")
    assert sorted(json.loads(repair.stdout)["requeued"]) == sorted([gone, garbage])
    assert (store_dir / "damaged").is_dir(), "what was left of a damaged folder is kept aside"
    with RunStore(store_dir, writer="realbench run") as store:
        pending = pending_items(store, RUN, KEYS, max_attempts=3, retry_given_up=False)
        assert sorted((i.key.task, i.key.seed) for i in pending) == [("t1", 1), ("t2", 0)]


def test_out_pointing_at_a_file_is_one_line(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    done = realbench_cli("run", "--pack", "taskpacks/train_ticketing", "--out", str(f), "--no-progress")
    assert done.returncode != 0
    assert "Traceback" not in done.stderr and "is a file" in done.stderr


def test_report_on_a_damaged_store_warns_instead_of_crashing(tmp_path):
    import shutil

    store_dir = tmp_path / "s"
    _fill(store_dir)
    with RunStore(store_dir, create=False) as store:
        (store.episode_dir(f"{RUN}/t2/s0/r0/a0") / "steps.jsonl").write_text("{garbage\n")
        shutil.rmtree(store.episode_dir(f"{RUN}/t1/s1/r1/a0"))
    done = realbench_cli("report", str(store_dir), "--out", str(tmp_path / "r.html"), "--resamples", "0")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "2 damaged episode(s) left out" in done.stderr
    assert (tmp_path / "r.html").stat().st_size > 0
