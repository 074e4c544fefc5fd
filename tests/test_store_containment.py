"""The run store stays inside its folder and never wedges: planted links, copied or ill-typed
episode folders, a second writer, a read-only folder and a full disk.

Every verdict is read from the disk (the outside file's bytes, the outside folder, the index read
with sqlite3) or from another process's view, never from the store's own report."""

from __future__ import annotations

import errno
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from realbench.errors import StoreError
from realbench.store import EpisodeKey, RunStore
from realbench.store_lock import StoreLinkError, StoreLockedError
from realbench.store_paths import StoreFullError
from tests.store_support import KEYS, ROOT, RUN, episode_result, fill_store, realbench_cli

RUN_DIR = "golden_clone"  # the run folder of RUN (store._safe)


def _one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    return errors[0]


def _index_rows(store_dir: Path, sql: str) -> list[tuple[object, ...]]:
    db = sqlite3.connect(f"file:{store_dir / 'index.sqlite'}?mode=ro", uri=True)
    try:
        return list(db.execute(sql))
    finally:
        db.close()


# --- links -----------------------------------------------------------------------------------


def test_a_symlinked_writer_lock_never_truncates_the_file_it_points_to(tmp_path):
    store_dir = tmp_path / "s"
    fill_store(store_dir)
    precious = tmp_path / "precious.txt"
    precious.write_bytes(b"keep me\n" * 100)
    store = RunStore(store_dir, create=False)  # opened before the link is planted
    (store_dir / "writer.lock").unlink()
    (store_dir / "writer.lock").symlink_to(precious)
    for kwargs in ({"writer": "realbench run"}, {"create": False}):
        with pytest.raises(StoreLinkError, match="writer.lock"):
            RunStore(store_dir, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(StoreLinkError, match="writer.lock"):  # the lock itself is opened O_NOFOLLOW
        store.add_label(f"{RUN}/t1/s0/r0/a0", "ann", True)
    store.close()
    assert precious.read_bytes() == b"keep me\n" * 100


def test_a_hard_linked_writer_lock_is_refused(tmp_path):
    store_dir = tmp_path / "s"
    fill_store(store_dir)
    precious = tmp_path / "precious.txt"
    precious.write_bytes(b"keep me")
    (store_dir / "writer.lock").unlink()
    os.link(precious, store_dir / "writer.lock")
    with pytest.raises(StoreLinkError):
        RunStore(store_dir, writer="realbench run")
    assert precious.read_bytes() == b"keep me"


def test_a_symlinked_run_folder_is_never_written_through(tmp_path):
    store_dir = tmp_path / "s"
    outside = tmp_path / "outside"
    outside.mkdir()
    (store_dir / "episodes").mkdir(parents=True)
    (store_dir / "episodes" / RUN_DIR).symlink_to(outside, target_is_directory=True)
    with pytest.raises(StoreLinkError, match="symbolic link"):
        RunStore(store_dir, writer="realbench run")
    done = realbench_cli("show", str(store_dir))
    assert done.returncode != 0 and "symbolic link" in _one_line_error(done)
    assert list(outside.iterdir()) == []


def test_the_pending_sweep_never_deletes_outside_the_store(tmp_path):
    store_dir = tmp_path / "s"
    fill_store(store_dir)
    victim = tmp_path / "victim"
    (victim / "sub").mkdir(parents=True)
    (victim / "sub" / "data.txt").write_text("mine")
    db = sqlite3.connect(store_dir / "index.sqlite")
    db.execute("INSERT INTO pending VALUES (?, ?)", ("x/y", "../victim"))
    db.execute("INSERT INTO pending VALUES (?, ?)", ("x/z", str(victim / "sub")))
    db.commit()
    db.close()
    RunStore(store_dir, writer="realbench run").close()  # the lock holder sweeps pending folders
    assert (victim / "sub" / "data.txt").read_text() == "mine"
    # a run folder swapped for a link after the store was opened: the sweep of a later open refuses
    (store_dir / "episodes" / "other").symlink_to(victim, target_is_directory=True)
    with pytest.raises(StoreLinkError):
        RunStore(store_dir, writer="realbench run")
    assert (victim / "sub" / "data.txt").read_text() == "mine"


def test_a_run_folder_swapped_for_a_link_mid_run_is_not_written_through(tmp_path):
    store_dir = tmp_path / "s"
    outside = tmp_path / "outside"
    outside.mkdir()
    with RunStore(store_dir, writer="realbench run") as store:
        store.ensure_run(RUN, pack="toy", app="toy", agent="golden", target="clone", config={})
        run_dir = store_dir / "episodes" / RUN_DIR
        shutil.rmtree(run_dir)
        run_dir.symlink_to(outside, target_is_directory=True)
        with pytest.raises(StoreLinkError):
            store.write_episode(RUN, KEYS[0], 0, "toy", episode_result("t1", 0))
    assert list(outside.iterdir()) == []


def test_a_dangling_index_link_never_creates_a_database_outside(tmp_path):
    store_dir = tmp_path / "s"
    store_dir.mkdir()
    target = tmp_path / "elsewhere" / "index.sqlite"
    target.parent.mkdir()
    (store_dir / "index.sqlite").symlink_to(target)
    for kwargs in ({"writer": "realbench run"}, {"create": True}):
        with pytest.raises(StoreLinkError, match="index.sqlite"):
            RunStore(store_dir, **kwargs)  # type: ignore[arg-type]
    assert not target.exists()
    assert list(target.parent.iterdir()) == []


# --- repair ----------------------------------------------------------------------------------


def _break_index(store_dir: Path) -> None:
    (store_dir / "index.sqlite").unlink()
    for wal in store_dir.glob("index.sqlite-*"):
        wal.unlink()


def test_repair_sets_aside_a_copied_episode_folder_and_leaves_a_usable_store(tmp_path):
    store_dir = tmp_path / "s"
    fill_store(store_dir)
    original = store_dir / "episodes" / RUN_DIR / "t1-s0-r0-a0"
    shutil.copytree(original, original.with_name("t1-s0-r0-a0 copy"))
    _break_index(store_dir)
    repair = realbench_cli("store", "repair", str(store_dir), "--json")
    assert repair.returncode == 1, repair.stderr
    assert "Traceback" not in repair.stderr
    refused = json.loads(repair.stdout)["refused"]
    assert len(refused) == 1 and "a copy of episode" in next(iter(refused.values()))
    # the copy now lives under damaged/, the original is indexed once
    assert len(list((store_dir / "damaged").rglob("episode.json"))) == 1
    assert _index_rows(store_dir, "SELECT COUNT(*) FROM episodes") == [(len(KEYS),)]
    show = realbench_cli("show", str(store_dir), "--json")
    assert show.returncode == 0, show.stderr
    assert realbench_cli("store", "check", str(store_dir)).returncode == 0


def test_repair_sets_aside_an_episode_whose_seed_is_not_a_number(tmp_path):
    store_dir = tmp_path / "s"
    fill_store(store_dir)
    bad = store_dir / "episodes" / RUN_DIR / "t2-s0-r0-a0" / "episode.json"
    meta = json.loads(bad.read_text())
    meta["seed"] = "zero"
    bad.write_text(json.dumps(meta))
    _break_index(store_dir)
    repair = realbench_cli("store", "repair", str(store_dir))
    assert repair.returncode == 1 and "Traceback" not in repair.stderr, repair.stderr
    assert "seed" in repair.stdout and "t2-s0-r0-a0" in repair.stdout
    assert _index_rows(store_dir, "SELECT COUNT(*) FROM episodes") == [(len(KEYS) - 1,)]
    assert realbench_cli("show", str(store_dir)).returncode == 0
    assert realbench_cli("store", "check", str(store_dir)).returncode == 0
    # the next run redoes the set-aside episode: it is simply not in the index
    with RunStore(store_dir, create=False) as store:
        assert EpisodeKey("t2", 0, 0) not in store.attempts(RUN)


# --- one writer at a time -------------------------------------------------------------------

HOLD_LOCK = textwrap.dedent(
    """
    import sys, time
    from realbench.store import RunStore
    store = RunStore(sys.argv[1], writer="realbench run")
    print("held", flush=True)
    time.sleep(60)
    """
)


@pytest.fixture
def holder(tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    store_dir = tmp_path / "s"
    fill_store(store_dir)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(store_dir)], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        yield store_dir, proc
    finally:
        proc.kill()
        proc.wait(10)


def test_a_label_write_while_a_run_writes_refuses_naming_the_holder(holder):
    store_dir, proc = holder
    episode = f"{RUN}/t1/s0/r0/a0"
    before = _index_rows(store_dir, "SELECT COUNT(*) FROM verdicts")
    store = RunStore(store_dir, create=False)  # how the console opens a store
    try:
        with (
            pytest.raises(StoreLockedError, match=rf"realbench run.*pid {proc.pid}"),
            store.writing("realbench console (labels)"),
        ):
            store.add_label(episode, "ann", True)
        with pytest.raises(StoreLockedError, match=rf"pid {proc.pid}"):
            store.add_label(episode, "ann", True)  # a write outside `writing` takes the lock too
    finally:
        store.close()
    assert _index_rows(store_dir, "SELECT COUNT(*) FROM verdicts") == before
    assert not (store_dir / "episodes" / RUN_DIR / "t1-s0-r0-a0" / "verdicts.jsonl").exists()


def test_a_label_write_takes_the_lock_so_a_run_waits_for_it(tmp_path):
    store_dir = tmp_path / "s"
    fill_store(store_dir)
    store = RunStore(store_dir, create=False)
    try:
        with store.writing("realbench console (labels)"):
            with pytest.raises(StoreLockedError, match="realbench console"):
                RunStore(store_dir, writer="realbench run")
            store.add_label(f"{RUN}/t1/s0/r0/a0", "ann", True)
        RunStore(store_dir, writer="realbench run").close()  # released after the block
    finally:
        store.close()
    assert _index_rows(store_dir, "SELECT COUNT(*) FROM verdicts WHERE source='human'") == [(1,)]


# --- read-only folders and full disks -------------------------------------------------------


def _read_only_cli(store_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`realbench ARGS` with `store_dir` read-only to it. File modes do not bind root, so as root
    the folder is bind-mounted read-only in a private mount namespace (nothing outside sees it)."""
    if os.geteuid() != 0:
        for p in sorted(store_dir.rglob("*"), reverse=True):
            p.chmod(0o555 if p.is_dir() else 0o444)
        store_dir.chmod(0o555)
        return realbench_cli(*args)
    if shutil.which("unshare") is None:
        pytest.skip("needs unshare(1) to make a read-only mount as root")
    script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", script, str(store_dir), sys.executable, "-m", "realbench", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    if "mount:" in done.stderr and "realbench" not in done.stderr:
        pytest.skip(f"cannot make a read-only mount here: {done.stderr.strip()}")
    return done


@pytest.mark.parametrize("leave_wal", [False, True], ids=["closed", "with-wal-files"])
def test_a_read_only_store_is_read_read_only_and_refused_to_writers_in_one_line(tmp_path, leave_wal):
    store_dir = tmp_path / "s"
    fill_store(store_dir)
    reader = None
    if leave_wal:  # a reader still has it open: -wal and -shm exist when the folder turns read-only
        reader = RunStore(store_dir, create=False)
        assert (store_dir / "index.sqlite-shm").exists()
    try:
        show = _read_only_cli(store_dir, "show", str(store_dir), "--json")
        assert show.returncode == 0, show.stderr
        runs = json.loads(show.stdout)["runs"]
        assert [r["run_id"] for r in runs] == [RUN] and runs[0]["episodes"] == len(KEYS)
        check = _read_only_cli(store_dir, "store", "check", str(store_dir))
        assert check.returncode == 0, check.stderr + check.stdout
        repair = _read_only_cli(store_dir, "store", "repair", str(store_dir))
        assert repair.returncode != 0
        assert "read-only" in _one_line_error(repair)
        run = _read_only_cli(
            store_dir, "run", "--pack", "taskpacks/toy", "--out", str(store_dir), "--no-progress"
        )
        assert run.returncode != 0
        assert "read-only" in _one_line_error(run)
    finally:
        if reader is not None:
            reader.close()
        for p in [store_dir, *store_dir.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)


def test_a_full_disk_during_a_write_is_one_line_naming_the_disk_and_leaves_the_store_consistent(
    tmp_path, monkeypatch
):
    import realbench.store as store_module

    store_dir = tmp_path / "s"
    fill_store(store_dir, KEYS[:1])
    real_write = store_module.write_new_file

    def full_after_a_few(path: Path, data: bytes) -> None:
        if path.name == "steps.jsonl":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        real_write(path, data)

    monkeypatch.setattr(store_module, "write_new_file", full_after_a_few)
    with RunStore(store_dir, writer="realbench run") as store, pytest.raises(StoreFullError) as err:
        store.write_episode(RUN, KEYS[1], 0, "toy", episode_result("t1", 1))
    message = err.value.message
    assert "\n" not in message and "full" in message and "file system /" in message
    assert isinstance(err.value, StoreError)
    monkeypatch.undo()
    # nothing half-written is left: no temporary folder, the index has only the first episode
    assert [p.name for p in (store_dir / "episodes" / RUN_DIR).iterdir() if p.is_dir()] == ["t1-s0-r0-a0"]
    assert _index_rows(store_dir, "SELECT episode_id FROM episodes") == [(f"{RUN}/t1/s0/r0/a0",)]
    assert realbench_cli("store", "check", str(store_dir)).returncode == 0
    # the rerun writes it
    with RunStore(store_dir, writer="realbench run") as store:
        store.write_episode(RUN, KEYS[1], 0, "toy", episode_result("t1", 1))
    assert len(_index_rows(store_dir, "SELECT episode_id FROM episodes")) == 2


def test_a_full_disk_ends_a_run_with_one_line(tmp_path, monkeypatch):
    """Through the runner: the worker's write error stops the run as one RealbenchError."""
    import realbench.store as store_module
    from realbench.runner import LocalRunner

    class FakeTarget:  # a fake: the runner only asks it to describe itself here
        def describe(self) -> dict[str, str]:
            return {"serial": "fake-0"}

    def full(path: Path, data: bytes) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(store_module, "write_new_file", full)
    from realbench.taskpack import load_pack

    pack = load_pack(ROOT / "taskpacks" / "toy")
    with RunStore(tmp_path / "s", writer="realbench run") as store:
        runner = LocalRunner(
            store,
            RUN,
            pack,
            [FakeTarget()],  # type: ignore[list-item]
            agent_factory=lambda: None,  # type: ignore[arg-type,return-value]
            progress=False,
            execute=lambda target, key: episode_result(key.task, key.seed),
        )
        with pytest.raises(StoreFullError, match="is full"):
            runner.run([EpisodeKey(pack.tasks[0].id, 0, 0)])
