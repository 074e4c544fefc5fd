"""Bootstraps `taskpacks/<app>/real.yaml` (real-side recipes) from a pack's clone golden plans.

One-shot: it translates the clone's plan into the real app's selectors where public evidence
names them (docs/real-apps.md), turns the pack's prose `real.setup` lines into typed steps or
`manual:` preconditions, declares fixture needs, lists per task what cannot match the real app,
and removes the prose lines from pack.yaml. The output is then checked by hand and by
`realbench certify`; later edits are made in real.yaml (or by the lab console's recorder), so the
script refuses to overwrite an existing real.yaml without --force.

    python taskpacks/gen_real_recipes.py taskpacks/train_ticketing [--force]
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

import yaml

# Clone selectors replaced by what public evidence gives for the real app.
EVIDENCE: dict[str, dict[str, dict[str, Any]]] = {
    "train_ticketing": {
        "text=查询车票": {"resource_id": "hp_query_button"},
    },
    "bank": {},
}
# Where the real app is an H5 WebView with few ids, a clone id is no evidence of anything.
H5_NOTE = {
    "train_ticketing": "the clone's id; no public evidence (12306 screens are often H5: record text)",
    "bank": "the clone's id; no public evidence of it in the CCB app",
}
PROBE_HOME = {
    "train_ticketing": {"resource_id": "hp_query_button"},
    "bank": {"text_contains": "总资产"},
}
KNOWN_PASSENGERS = ("李明", "王芳", "李小雨", "张强", "陈静")
ROUTE_PROSE = re.compile(r"^首页出发地为(\S+?)、目的地为(\S+?)、日期为明天$")
BANK_HOME_PROSE = "登录测试账户，停留在手机银行首页"
# Ids the evidence names, or that the clone took from it: no "unmatched" note for them.
REAL_IDS = {"hp_query_button"}
SOLD_OUT = "sold-out-train"
# Trains and stops named by the instruction exist in the clone's invented timetable; a real
# account "holds" this fact only where the lab has checked the real timetable has them too.
CLONE_TIMETABLE = "clone-timetable"
NAMED_TRAIN = re.compile(r"[GDCZTK]\d+次")


def _key(sel: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(sel.items()))


def translate(app: str, sel: dict[str, Any]) -> dict[str, Any]:
    return dict(EVIDENCE.get(app, {}).get(_key(sel), sel))


def _selectors(step: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for key in ("tap", "long_press"):
        if isinstance(step.get(key), dict):
            out.append(step[key])
    t = step.get("type")
    if isinstance(t, dict) and isinstance(t.get("into"), dict):
        out.append(t["into"])
    if isinstance(step.get("scroll_to"), dict):
        out.append(step["scroll_to"]["selector"])
    a = step.get("answer")
    if isinstance(a, dict) and isinstance(a.get("read"), dict):
        out.append(a["read"])
    return out


def _translate_step(app: str, step: dict[str, Any]) -> dict[str, Any]:
    step = yaml.safe_load(yaml.safe_dump(step, allow_unicode=True))
    for key in ("tap", "long_press"):
        if isinstance(step.get(key), dict):
            step[key] = translate(app, step[key])
    t = step.get("type")
    if isinstance(t, dict) and isinstance(t.get("into"), dict):
        t["into"] = translate(app, t["into"])
    if isinstance(step.get("scroll_to"), dict):
        step["scroll_to"]["selector"] = translate(app, step["scroll_to"]["selector"])
    a = step.get("answer")
    if isinstance(a, dict) and isinstance(a.get("read"), dict):
        a["read"] = translate(app, a["read"])
    return step


def route_setup(frm: str, to: str) -> list[dict[str, Any]]:
    return [
        {"do": "tap", "selector": {"resource_id": "from_station"}},
        {"do": "tap", "selector": {"text": frm, "resource_id": "hot_city"}},
        {"do": "tap", "selector": {"resource_id": "to_station"}},
        {"do": "tap", "selector": {"text": to, "resource_id": "hot_city"}},
        {"do": "tap", "selector": {"resource_id": "date_row"}},
        {
            "do": "tap",
            "selector": {"content_desc": "{date_date}"},
            "expect": [
                {"selector": {"text": frm, "resource_id": "from_station"}},
                {"selector": {"text": to, "resource_id": "to_station"}},
            ],
        },
    ]


def recipe_for(
    app: str, task: dict[str, Any], evidence_ids: set[str], previous: dict[str, Any] | None = None
) -> dict[str, Any]:
    real = task.get("real") or {}
    prose = [s for s in real.get("setup", []) if isinstance(s, str)]
    home = PROBE_HOME[app]
    setup: list[dict[str, Any]] = [{"do": "wait_for", "selector": home}]
    manual: list[str] = []
    for line in prose:
        m = ROUTE_PROSE.match(line)
        if m:
            setup += route_setup(m.group(1), m.group(2))
        elif line == BANK_HOME_PROSE:
            pass  # the logged-in launch screen: the wait_for above
        else:
            manual.append(line)
    if previous and not prose:  # the prose is gone from the pack: keep what it became
        setup = previous.get("setup", setup)
        manual = previous.get("manual", [])
    if task["id"] == "show_hidden_balance":
        setup[0]["expect"] = [{"selector": {"text_contains": "****"}}]
    boundary = real.get("boundary") or []
    answers = (task.get("answer") or {}).get("type", "none") != "none"
    golden: list[dict[str, Any]] = []
    unmatched: list[str] = []
    if boundary or answers:
        golden = [_translate_step(app, s) for s in task["golden"] if "terminate" not in s]
    else:
        unmatched.append(
            "no real golden plan: the task has neither a commit boundary to stop at nor an answer to read"
        )
    if any(line.startswith("注销") for line in manual):
        golden = []
        unmatched.append(
            "starts logged out, but the harness logs the app in before setup: not runnable as is"
        )
    seen: set[str] = set()
    for step in [s for s in setup if s.get("do") != "wait_for"] + golden:
        sels = step.get("selector") and [step["selector"]] or _selectors(step)
        for sel in sels:
            rid = sel.get("resource_id")
            if rid and rid not in evidence_ids and rid not in seen:
                seen.add(rid)
                unmatched.append(f"{rid}: {H5_NOTE[app]}")
    fixtures = fixture_needs(app, task, golden)
    out: dict[str, Any] = {}
    if manual:
        out["manual"] = manual
    out["setup"] = setup
    if golden:
        out["golden"] = golden
    if fixtures:
        out["fixtures"] = fixtures
    if unmatched:
        out["unmatched"] = unmatched
    return out


def fixture_needs(app: str, task: dict[str, Any], golden: list[dict[str, Any]]) -> dict[str, Any]:
    params: dict[str, str] = {}
    holds: dict[str, list[str]] = {}
    text = task["instruction"] + yaml.safe_dump(golden, allow_unicode=True)
    if app == "train_ticketing":
        names = [n for n in KNOWN_PASSENGERS if n in text]
        if names:
            holds["passengers"] = names
        facts = []
        if "waitlist" in task.get("tags", []) and task["id"] != "cancel-waitlist":
            facts.append(SOLD_OUT)
        if NAMED_TRAIN.search(task["instruction"]) or task["id"] == "change-destination":
            facts.append(CLONE_TIMETABLE)
        if facts:
            holds["facts"] = facts
    else:
        by_param = {"payee": "payees", "fund": "funds", "branch": "branches", "account_no": "bill_accounts"}
        for name in task.get("params", {}):
            if name in by_param:
                params[name] = by_param[name]
        tails = sorted(set(re.findall(r"尾号(\d{4})", task["instruction"])))
        if tails:
            holds["card_tails"] = tails
    out: dict[str, Any] = {}
    if params:
        out["params"] = params
    if holds:
        out["holds"] = holds
    return out


def strip_prose(pack_text: str) -> str:
    """Drop `setup: [prose]` lines of real blocks (clone setups are mappings, never lists of text)."""
    lines = pack_text.splitlines(keepends=True)
    out: list[str] = []
    for i, line in enumerate(lines):
        if re.match(r"^\s+setup: \[(?!\{).*\]\s*$", line):
            prev = out[-1] if out else ""
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            indent = len(line) - len(line.lstrip())
            # a real: block left empty disappears with its last line
            if prev.strip() == "real:" and (len(nxt) - len(nxt.lstrip())) < indent:
                out.pop()
            continue
        out.append(line)
    return "".join(out)


class _NoAliases(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pack_dir", type=Path)
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args(argv)
    pack_path = args.pack_dir / "pack.yaml"
    out_path = args.pack_dir / "real.yaml"
    if out_path.exists() and not args.force:
        print(f"{out_path} exists; edit it by hand (or pass --force to regenerate)", file=sys.stderr)
        return 1
    text = pack_path.read_text(encoding="utf-8")
    raw = yaml.safe_load(text)
    app = raw["app"]
    old = yaml.safe_load(out_path.read_text(encoding="utf-8")) if out_path.exists() else {}
    previous = (old or {}).get("tasks", {})
    recipes = {t["id"]: recipe_for(app, t, REAL_IDS, previous.get(t["id"])) for t in raw["tasks"]}
    header = (
        f"# Real-side recipes of the {app} pack, keyed by task id (merged into each task's `real:`).\n"
        "# Bootstrapped by taskpacks/gen_real_recipes.py from the clone's plans, then checked by hand;\n"
        "# the lab console's recorder and hand edits maintain it. `unmatched` lists what is known not\n"
        "# to match the real app yet (clone ids without public evidence); `realbench certify` settles it.\n"
    )
    body = yaml.dump(
        {"app": app, "tasks": recipes}, allow_unicode=True, sort_keys=False, width=110, Dumper=_NoAliases
    )
    out_path.write_text(header + body, encoding="utf-8")
    pack_path.write_text(strip_prose(text), encoding="utf-8")
    print(f"wrote {out_path} ({len(recipes)} recipes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
