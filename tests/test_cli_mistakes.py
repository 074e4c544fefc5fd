"""Ordinary mistakes on the command line end in one clear error line and exit 2, and create nothing.

Each command runs as a user runs it (a subprocess of `python -m realbench`, stdout a pipe); the
verdict comes from the exit status, the output and the files on disk."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACK = ROOT / "taskpacks" / "train_ticketing"


def realbench(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    return subprocess.run(
        [sys.executable, "-m", "realbench", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd or ROOT,
        env=env,
    )


def one_error_line(res: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in res.stderr, res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, res.stderr
    return errors[0]


def test_demo_into_a_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    target = tmp_path / "a-file"
    target.write_text("keep me", encoding="utf-8")
    res = realbench("demo", "--out", str(target))
    assert res.returncode == 2, res.stderr
    assert "is a file, not a folder" in one_error_line(res)
    assert target.read_text(encoding="utf-8") == "keep me"


@pytest.mark.parametrize("below", [False, True], ids=["out-is-a-file", "out-under-a-file"])
def test_run_out_at_or_under_a_file_is_one_line_and_exit_2(tmp_path: Path, below: bool) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x", encoding="utf-8")
    out = blocker / "sub" if below else blocker
    res = realbench("run", "--pack", str(PACK), "--out", str(out), "--tasks", "query-beijing-shanghai")
    assert res.returncode == 2, res.stderr
    line = one_error_line(res)
    assert str(blocker) in line and "file" in line
    assert blocker.read_text(encoding="utf-8") == "x"


def test_a_real_run_without_a_rig_refuses_before_creating_a_store(tmp_path: Path) -> None:
    out = tmp_path / "store"
    res = realbench(
        "run",
        "--pack",
        str(PACK),
        "--out",
        str(out),
        "--target",
        "real",
        "--confirm-manual",
        "--agent",
        "golden",
    )
    assert res.returncode == 2, res.stderr
    assert "needs --rig" in one_error_line(res)
    assert not out.exists()


@pytest.mark.parametrize("command", [["show"], ["store", "check"]])
@pytest.mark.parametrize("what", ["missing", "file", "empty-folder"])
def test_show_and_store_check_on_a_wrong_path_exit_2(tmp_path: Path, command: list[str], what: str) -> None:
    path = tmp_path / "x"
    if what == "file":
        path.write_text("x", encoding="utf-8")
    elif what == "empty-folder":
        path.mkdir()
    res = realbench(*command, str(path))
    assert res.returncode == 2, (res.stdout, res.stderr)
    one_error_line(res)
    # Nothing was created at the wrong path.
    assert not (path.is_dir() and any(path.iterdir()))


def test_piped_tables_keep_long_names_whole() -> None:
    from rich.console import Console
    from rich.table import Table

    from realbench.full_width import print_full_width

    serial = "emulator-" + "5" * 90
    table = Table("serial", "model")
    table.add_row(serial, "a judge model with a rather long name/v2-instruct-2025")
    import io

    buf = io.StringIO()
    print_full_width(Console(file=buf), table)  # a StringIO is not a terminal
    text = buf.getvalue()
    assert serial in text and "a judge model with a rather long name/v2-instruct-2025" in text
    assert "…" not in text


def test_piped_audit_prints_long_model_names_whole(tmp_path: Path) -> None:
    from tests.analysis_fixtures import BASE, audit_frame

    long_name = "openai:Qwen2.5-VL-72B-Instruct-checkpoint-step-12000-clone-trained-final-b"
    table = tmp_path / "audit.csv"
    audit_frame(n_tasks=20).replace({BASE: long_name}).to_csv(table, index=False)
    res = realbench("audit", "--table", str(table))
    assert res.returncode == 0, res.stderr
    assert long_name in res.stdout
    assert not any(line.endswith("…") or "…│" in line for line in res.stdout.splitlines())
