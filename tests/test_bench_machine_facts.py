"""What the benchmarks record about the interpreter (`benchmarks/machine_info.py`): whether the
modules they loaded had bytecode on disk, read from the files, since a worker without it spends
seconds compiling (a bring-up figure depends on it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROBE = (
    "import sys; sys.path.insert(0, sys.argv[1]); import json, email.mime.text;"
    "from benchmarks.machine_info import bytecode_facts; print(json.dumps(bytecode_facts()))"
)


def _facts(prefix: Path, *, write: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(prefix)  # a cache of this test's own, empty at first
    if not write:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(REPO)], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def test_modules_compiled_from_source_are_counted_as_without_bytecode(tmp_path) -> None:
    facts = _facts(tmp_path / "cache", write=False)
    assert facts["writes"] is False
    assert facts["source_modules"] > 10 and facts["with_bytecode"] == 0
    assert not (tmp_path / "cache").exists()


def test_a_second_interpreter_finds_the_bytecode_the_first_wrote(tmp_path) -> None:
    first = _facts(tmp_path / "cache", write=True)
    # the first wrote each module's bytecode as it imported it, so it finds it on disk afterwards
    assert first["writes"] is True
    written = list((tmp_path / "cache").rglob("*.pyc"))
    assert len(written) >= first["source_modules"] - 2
    second = _facts(tmp_path / "cache", write=False)
    assert second["source_modules"] == first["source_modules"]
    assert second["with_bytecode"] == second["source_modules"]


def test_bytecode_for_another_version_of_the_source_does_not_count(tmp_path) -> None:
    _facts(tmp_path / "cache", write=True)
    for pyc in (tmp_path / "cache").rglob("*.pyc"):
        data = bytearray(pyc.read_bytes())
        data[8:12] = (int.from_bytes(data[8:12], "little") ^ 1).to_bytes(4, "little")  # source mtime
        pyc.write_bytes(bytes(data))
    assert _facts(tmp_path / "cache", write=False)["with_bytecode"] == 0
