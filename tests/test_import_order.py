"""`import devices.phone_target` as a program's first import used to fail: it imports
`devices.farm.health`, whose package eagerly re-exported `devices.farm.rig_targets`, which imports
`devices.phone_target` back. The farm package now resolves its re-exports on first use."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

FIRST_IMPORTS = """
import devices.phone_target
from devices.farm import FarmTarget, farm_pool, targets_from_rig
from devices.farm.rig_targets import targets_from_rig as direct
assert targets_from_rig is direct and devices.phone_target.PhoneTarget
import devices.farm
try:
    devices.farm.no_such_name
except AttributeError:
    pass
else:
    raise SystemExit("an unknown name resolved")
print("ok")
"""


def test_the_phone_target_can_be_the_first_import() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", FIRST_IMPORTS], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-3000:]
