"""`realbench.procfs.stat_fields` against a process whose name holds what would break a naive split."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from realbench.procfs import PARENT, START_TIME, STATE, stat_fields

_NAMED = (
    "import sys, time; open('/proc/self/comm', 'w').write('a) 1 (b c'); print(flush=True); time.sleep(30)"
)


def test_fields_are_found_past_a_name_with_spaces_and_parentheses() -> None:
    child = subprocess.Popen([sys.executable, "-c", _NAMED], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline() == "\n"
        fields = stat_fields(child.pid)
        assert fields is not None
        assert fields[STATE] in {"S", "R"} and int(fields[PARENT]) == os.getpid()
        mine = stat_fields(os.getpid())
        assert mine is not None and int(fields[START_TIME]) >= int(mine[START_TIME])
    finally:
        child.kill()
        child.wait(10)
    time.sleep(0.05)
    assert stat_fields(child.pid) is None  # waited for: gone


def test_no_such_process_gives_none() -> None:
    assert stat_fields(2**22 + 1) is None  # above the kernel's pid_max ceiling
