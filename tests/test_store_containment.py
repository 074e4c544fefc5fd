"""The run store stays inside its folder and never wedges: planted links, copied or ill-typed
episode folders, a second writer, a read-only folder and a full disk.

Every verdict is read from the disk (the outside file's bytes, the outside folder, the index read
with sqlite3) or from another process's view, never from the store's own report."""

from __future__ import annotations

import ctypes
import errno
import functools
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
    the folder is bind-mounted read-only in a private mount namespace (nothing outside sees it), or,
    where mount namespaces are not allowed, without the capabilities that let root override modes."""
    if os.geteuid() != 0:
        _read_only_modes(store_dir)
        return realbench_cli(*args)
    script = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if shutil.which("unshare") is not None:
        done = subprocess.run(
            ["unshare", "-m", "sh", "-c", script, str(store_dir), sys.executable, "-m", "realbench", *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=180,
            env=env,
        )
        if not ("mount:" in done.stderr or "unshare:" in done.stderr) or "realbench" in done.stderr:
            return done
    return _without_mode_overrides(store_dir, *args)


def _read_only_modes(store_dir: Path) -> None:
    for p in sorted(store_dir.rglob("*"), reverse=True):
        p.chmod(0o555 if p.is_dir() else 0o444)
    store_dir.chmod(0o555)


# Capabilities that let root ignore file modes (linux/capability.h): without them in its bounding set a
# process running as root is held to the modes like any owner.
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER = 1, 2, 3
PR_CAPBSET_DROP = 24


def _drop_mode_overrides() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_FOWNER):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _without_mode_overrides(store_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Root where mount namespaces are not allowed: the command runs as root without the
    capabilities that override file modes, so the store's read-only modes bind it."""
    _read_only_modes(store_dir)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "realbench", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        preexec_fn=_drop_mode_overrides,
    )


def test_the_fallback_without_mode_overrides_cannot_write_the_store(tmp_path):
    """The fallback above is only a read-only store if the process really cannot write: shown on
    the disk, not by realbench's own refusal."""
    if os.geteuid() != 0:
        pytest.skip("the fallback is for root")
    store_dir = tmp_path / "s"
    fill_store(store_dir)
    _read_only_modes(store_dir)
    probe = store_dir / "probe"
    try:
        done = subprocess.run(
            [sys.executable, "-c", f"open({str(probe)!r}, 'w')"],
            capture_output=True,
            text=True,
            preexec_fn=_drop_mode_overrides,
        )
        assert done.returncode != 0 and "Permission denied" in done.stderr
        assert not probe.exists()
        # the same write as root with its capabilities goes through: the modes alone do not bind root
        subprocess.run([sys.executable, "-c", f"open({str(probe)!r}, 'w')"], check=True)
        assert probe.exists()
    finally:
        for p in [store_dir, *store_dir.rglob("*")]:
            p.chmod(0o755 if p.is_dir() else 0o644)


@pytest.mark.parametrize(
    ("leave_wal", "without_overrides"),
    [(False, False), (True, False), (False, True)],
    ids=["closed", "with-wal-files", "closed-without-mode-overrides"],
)
def test_a_read_only_store_is_read_read_only_and_refused_to_writers_in_one_line(
    tmp_path, leave_wal, without_overrides
):
    if without_overrides and os.geteuid() != 0:
        pytest.skip("a user has no mode overrides: the other cases are this one")
    store_dir = tmp_path / "s"
    fill_store(store_dir)
    reader = None
    if leave_wal:  # a reader still has it open: -wal and -shm exist when the folder turns read-only
        reader = RunStore(store_dir, create=False)
        assert (store_dir / "index.sqlite-shm").exists()
    cli = (
        functools.partial(_without_mode_overrides, store_dir)
        if without_overrides
        else functools.partial(_read_only_cli, store_dir)
    )
    try:
        show = cli("show", str(store_dir), "--json")
        assert show.returncode == 0, show.stderr
        runs = json.loads(show.stdout)["runs"]
        assert [r["run_id"] for r in runs] == [RUN] and runs[0]["episodes"] == len(KEYS)
        check = cli("store", "check", str(store_dir))
        assert check.returncode == 0, check.stderr + check.stdout
        repair = cli("store", "repair", str(store_dir))
        assert repair.returncode != 0
        assert "read-only" in _one_line_error(repair)
        run = cli("run", "--pack", "taskpacks/toy", "--out", str(store_dir), "--no-progress")
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
