"""Generated attacks on the interlock, by the thousand (the cases: tests/interlock_fuzz_cases.py).

Each case is a phone screen composed from parts (label forms × control forms × inputs × paths),
run twice on a fresh in-process virtual phone (devices/virtual/composed_phone.py): unguarded, where
the screen's own commit records say whether the input commits, and behind the guard, armed as the
pack's setup arms it (the `console` path: the guard as the lab console arms it, every pack's stop
lists and one policy for all packs; the console's page and its confirm dialog, driven in Chromium,
are a fixed sample in tests/test_console_dialog_sample.py). Reported:

- cases, and how many commit unguarded (the traps) or must not (safe inputs: cancel, an amount,
  back / home / recent); a trap that did not commit unguarded, or a safe input that did, is counted
  as a dead case (the generator's bug, not the guard's);
- commits behind the guard, each with its seed, case number and a description to reproduce it
  (`--seed S --only I`);
- false blocks: safe inputs the guard refused (split by whether a screen the pack marks safe was
  shown), and, with `--golden`, the guard's blocks on the packs' real golden plans before their
  commit boundary, run by certify on virtual phones showing the clones (Chromium);
- `--e2e K`: K cases also run through the real adb server and uiautomator2 client, unguarded and
  guarded, with the verdicts compared to the in-process ones;
- CPU model, cores, load average before and after, and the wall time.

The fuzzer reports; it does not assert its target (0 commits in 10 000 cases, 0 false blocks on the
golden plans). `--findings FILE` appends the commits behind the guard as Markdown.

    .venv/bin/python benchmarks/interlock_fuzz.py [--cases N] [--seed S] [--json] [--e2e K]
        [--golden none|sample|all] [--only I] [--findings FILE]
"""

from __future__ import annotations

import argparse
import collections
import json
import logging
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from machine_info import machine_facts  # noqa: E402

from tests.interlock_fuzz_cases import (  # noqa: E402
    Verdict,
    e2e_sample,
    judge,
    make_case,
    quiet_guard_logs,
)


def fuzz(seed: int, n: int, start: int = 0) -> Iterator[Verdict]:
    for i in range(start, start + n):
        yield judge(lambda i=i: make_case(seed, i))  # type: ignore[misc]


def summarise(verdicts: list[Verdict]) -> dict[str, Any]:
    by_input: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    by_path: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    behind, false_blocks, dead, errors = [], [], [], []
    for v in verdicts:
        c = v.case
        for table, key in ((by_input, c.input_form), (by_path, c.path)):
            table[key]["cases"] += 1
            table[key]["behind"] += v.commit_behind_guard
            table[key]["blocked"] += v.guarded.blocked
        if v.commit_behind_guard:
            behind.append(finding(v))
        if v.false_block:
            false_blocks.append(
                {"case": c.key, "description": c.describe(), "allowed_by_design": v.allowed_by_design}
            )
        if not v.trap_works:
            dead.append({"case": c.key, "description": c.describe(), "bare_error": v.bare.error})
        if v.guarded.error and not v.guarded.blocked:
            errors.append({"case": c.key, "error": v.guarded.error})
    safe = [v for v in verdicts if v.case.intent == "safe"]
    return {
        "cases": len(verdicts),
        "traps": sum(v.case.intent == "commit" for v in verdicts),
        "traps_committed_unguarded": sum(v.case.intent == "commit" and v.bare.committed for v in verdicts),
        "safe_inputs": len(safe),
        "dead_cases": dead,
        "commits_behind_guard": len(behind),
        "behind_by_gap": dict(collections.Counter(v.gap_kind() for v in verdicts if v.commit_behind_guard)),
        "behind": behind,
        "false_blocks_safe_inputs": len(false_blocks),
        # safe inputs the design allows (keys anywhere; taps, and text where allowed, on a screen
        # the pack catalogues as safe): each one blocked is a false block of the guard
        "false_blocks_allowed_by_design": sum(f["allowed_by_design"] for f in false_blocks),
        "safe_inputs_allowed_by_design": sum(v.allowed_by_design for v in verdicts),
        "commits_behind_guard_on_catalogued_screens": sum(
            v.commit_behind_guard and v.case.shown_safe is not None for v in verdicts
        ),
        "false_blocks": false_blocks,
        "guard_path_errors": errors,
        "by_input": {k: dict(v) for k, v in sorted(by_input.items())},
        "by_path": {k: dict(v) for k, v in sorted(by_path.items())},
    }


def finding(v: Verdict) -> dict[str, Any]:
    c = v.case
    return {
        "case": c.key,
        "seed": c.seed,
        "index": c.index,
        "description": c.describe(),
        "input": c.step_text(),
        "why": v.why(),
        "gap": v.gap(),
        "guarded_blocked": v.guarded.blocked,
    }


# --- the packs' golden plans through the guard ----------------------------------------------------


def golden_false_blocks(
    mode: str,
    out: Path,
    only_pack: str | None = None,
    shard: tuple[int, int] = (0, 1),
    only_tasks: list[str] | None = None,
) -> dict[str, Any]:
    """The real golden plans of both packs, run by certify (setup and plan through the armed guard)
    on a virtual phone showing the clones. A block before the plan's commit boundary — in setup, at
    any step but a boundary task's last tap, or in a task without a boundary — is a false block."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from certify_all import PACKS, VIRTUAL, rig_for

    from devices.certify import certify
    from devices.certify_sample import runnable_tasks, stratified_subset
    from devices.virtual import VirtualPhoneHost
    from realbench.taskpack import load_pack

    packs = {name: load_pack(path) for name, path in PACKS.items() if only_pack in (None, name)}
    fixtures = {a.app: a.fixture for a in VIRTUAL.accounts}
    if mode == "sample":
        subset = stratified_subset((p, fixtures[p.real_app.package]) for p in packs.values())
        ids = {name: [s.task for s in subset if s.app == p.app] for name, p in packs.items()}
    else:
        ids = {
            name: [t.id for t in runnable_tasks(p, fixtures[p.real_app.package])] for name, p in packs.items()
        }
    # one shard of each pack's tasks (every n-th from the k-th): runs in parallel processes add up
    k, n = shard
    ids = {name: [t for t in tasks[k::n] if not only_tasks or t in only_tasks] for name, tasks in ids.items()}
    report: dict[str, Any] = {"mode": mode, "packs": {}, "false_blocks": 0, "blocks": [], "shard": f"{k}/{n}"}
    t0 = time.perf_counter()
    with VirtualPhoneHost() as host:
        phone = host.start(1, screens="clone", drift="none")[0]
        host.adb_connect()
        for name, p in packs.items():
            cert = certify(rig_for(phone), p, out / name, task_ids=ids[name])
            false = []
            for r in cert.results:
                if not r.runnable:
                    continue
                task = p.task(r.task)
                for s in r.steps:
                    stopped = "interlock" in s.detail or ("blocked" in s.detail and s.phase == "setup")
                    if not stopped:
                        continue
                    last = len(task.real.golden) - 1
                    expected = bool(task.real.boundary) and s.phase == "golden" and s.index == last
                    if not expected:
                        false.append(f"{r.task}: {s.phase} step {s.index} ({s.kind}) {s.detail}")
                in_setup = r.failed_step is not None and not r.failed_step.startswith("golden.")
                if in_setup and "interlock" in r.reason.lower():
                    false.append(f"{r.task}: {r.failed_step} {r.reason}")
            runnable = [r for r in cert.results if r.runnable]
            report["packs"][name] = {
                "tasks_run": len(runnable),
                "certified": sum(r.certified for r in runnable),
                "false_blocks": len(false),
                "not_certified": [f"{r.task}: {r.failed_step} {r.reason}" for r in cert.failed()],
            }
            report["false_blocks"] += len(false)
            report["blocks"] += false
    report["wall_s"] = round(time.perf_counter() - t0, 1)
    return report


# --- the command ----------------------------------------------------------------------------------


def findings_markdown(report: dict[str, Any], guard_note: str) -> str:
    lines = [
        f"\n## Fuzz run: seed {report['seed']}, cases {report['start']}..{report['start'] + report['cases'] - 1}",
        f"{guard_note}: {report['commits_behind_guard']} commits behind the guard in {report['cases']} cases; "
        f"{report['false_blocks_safe_inputs']} false blocks on safe inputs.",
        "Reproduce one: `.venv/bin/python benchmarks/interlock_fuzz.py --seed S --only I`.",
        "",
    ]
    for f in report["behind"]:
        lines.append(
            f"- {f['description']}\n  - input: {f['input']}\n  - why it commits: {f['why']}\n  - gap: {f['gap']}"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=1000, help="how many generated cases")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", type=int, default=0, help="the first case number")
    parser.add_argument("--only", type=int, help="run and describe this one case number")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--e2e", type=int, default=0, help="cases also run through the adb server")
    parser.add_argument("--golden", choices=("none", "sample", "all"), default="none")
    parser.add_argument("--golden-pack", help="run the golden plans of this pack only")
    parser.add_argument(
        "--golden-shard", default="0/1", help="K/N: every N-th task from the K-th (parallel processes)"
    )
    parser.add_argument("--golden-task", action="append", help="run the golden plan of this task only")
    parser.add_argument("--findings", type=Path, help="append the commits behind the guard here (Markdown)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR, format="%(levelname)s %(name)s: %(message)s")
    if args.only is not None:
        with quiet_guard_logs():
            v = judge(lambda: make_case(args.seed, args.only))
        print(v.case.describe())
        print(f"unguarded: committed={v.bare.committed} {v.bare.commits} {v.bare.error}")
        print(f"guarded:   committed={v.guarded.committed} blocked={v.guarded.blocked} {v.guarded.error}")
        return 0
    before = machine_facts()
    t0, c0 = time.perf_counter(), time.process_time()
    with quiet_guard_logs():
        verdicts = list(fuzz(args.seed, args.cases, args.start))
    fuzz_s, fuzz_cpu = time.perf_counter() - t0, time.process_time() - c0
    report: dict[str, Any] = {"seed": args.seed, "start": args.start, **summarise(verdicts)}
    report["fuzz_wall_s"] = round(fuzz_s, 1)
    report["ms_per_case"] = round(1000 * fuzz_s / max(1, len(verdicts)), 1)
    # this process's CPU time: the wall time on a shared machine is mostly waiting for a core
    report["cpu_ms_per_case"] = round(1000 * fuzz_cpu / max(1, len(verdicts)), 1)
    if args.e2e:
        with quiet_guard_logs():
            report["e2e"] = e2e_sample(args.seed, args.e2e, args.start)
    if args.golden != "none":
        with tempfile.TemporaryDirectory(prefix="fuzz-golden-") as tmp, quiet_guard_logs():
            k, n = (int(v) for v in args.golden_shard.split("/"))
            report["golden"] = golden_false_blocks(
                args.golden, Path(tmp), args.golden_pack, (k, n), args.golden_task
            )
    report["machine_before"] = before
    report["machine_after"] = machine_facts()
    report["wall_s"] = round(time.perf_counter() - t0, 1)
    if args.findings is not None:
        with args.findings.open("a", encoding="utf-8") as fh:
            fh.write(findings_markdown(report, "guard as in the tree at the time of the run"))
    if args.json:
        print(json.dumps(report, ensure_ascii=False))
    else:
        print_report(report)
    return 0


def print_report(r: dict[str, Any]) -> None:
    m, after = r["machine_before"], r["machine_after"]
    print(f"machine: {m['cpu']}, {m['cores']} cores, load average {m['load_avg']} -> {after['load_avg']}")
    print(
        f"cases: {r['cases']} (seed {r['seed']}, from {r['start']}) in {r['fuzz_wall_s']} s, "
        f"{r['ms_per_case']} ms per case ({r['cpu_ms_per_case']} ms CPU); traps {r['traps']} "
        f"({r['traps_committed_unguarded']} committed unguarded), safe inputs {r['safe_inputs']}, "
        f"dead cases {len(r['dead_cases'])}"
    )
    print(
        f"commits behind the guard: {r['commits_behind_guard']} "
        f"({r['commits_behind_guard_on_catalogued_screens']} with a catalogued safe screen's marker shown)"
    )
    for gap, count in sorted(r["behind_by_gap"].items()):
        print(f"  {count} x {gap}")
    for f in r["behind"]:
        print(f"  COMMITTED {f['description']}\n    why: {f['why']}; gap: {f['gap']}")
    print(
        f"false blocks on safe inputs: {r['false_blocks_safe_inputs']} "
        f"of {r['safe_inputs']}; {r['false_blocks_allowed_by_design']} of the "
        f"{r['safe_inputs_allowed_by_design']} the design allows (keys; taps and text on catalogued screens)"
    )
    for name, table in (("input", r["by_input"]), ("path", r["by_path"])):
        cells = ", ".join(f"{k} {v.get('behind', 0)}/{v['cases']}" for k, v in table.items())
        print(f"behind the guard by {name}: {cells}")
    if "e2e" in r:
        e = r["e2e"]
        print(f"adb end-to-end sample: {e['agree']} of {e['sample']} agree with the in-process verdicts")
        for d in e["disagreements"]:
            print(f"  DISAGREE {d}")
    if "golden" in r:
        g = r["golden"]
        print(f"golden plans ({g['mode']}): {g['false_blocks']} false blocks, {g['wall_s']} s")
        for name, p in g["packs"].items():
            print(
                f"  {name}: {p['tasks_run']} tasks, {p['certified']} certified, {p['false_blocks']} false blocks"
            )
            for why in p["not_certified"]:
                print(f"    not certified: {why}")
        for b in g["blocks"]:
            print(f"  FALSE BLOCK {b}")
    print(f"wall time: {r['wall_s']} s")


if __name__ == "__main__":
    sys.exit(main())
