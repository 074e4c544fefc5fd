"""Retrain every committed element-policy checkpoint (checkpoints/*/*/policy.json) from the exact
`realbench train` command its card records, into a scratch folder, and compare the weights' sha256
with the committed one. Prints each card's updates, training wall time and whether it matched, with
the machine; exits 1 if any differs. (The slow test tier reruns only each long card's first updates;
this is the whole rerun: about ten CPU-minutes per 192-update card on 2 cores.)

    .venv/bin/python benchmarks/checkpoints_rerun.py [--only trained] [--out out/checkpoints-rerun]
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine_info import machine_line  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", default="out/checkpoints-rerun")
    parser.add_argument("--only", default="", help="comma-separated checkpoint folder names")
    args = parser.parse_args()
    only = {n for n in args.only.split(",") if n}
    cards = sorted(
        p for p in (ROOT / "checkpoints").glob("*/*/policy.json") if not only or p.parent.name in only
    )
    print(machine_line())
    failed = 0
    for card_file in cards:
        card = json.loads(card_file.read_text(encoding="utf-8"))
        argv = shlex.split(card["command"])
        out = Path(args.out) / card_file.parent.relative_to(ROOT / "checkpoints")
        argv[argv.index("--out") + 1] = str(out)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "realbench", *argv[1:], "--no-progress"], cwd=ROOT, check=True)
        seconds = time.perf_counter() - t0
        again = json.loads((out / "policy.json").read_text(encoding="utf-8"))["weights_sha256"]
        same = again == card["weights_sha256"]
        failed += not same
        print(
            f"{card_file.parent.relative_to(ROOT)}: {card['updates']} updates, {seconds:.0f} s, "
            f"{'same weights' if same else 'DIFFERENT weights'} ({again[:12]})"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
