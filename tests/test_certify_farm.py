"""`realbench certify` on virtual phones whose apps are the clones (Chromium screens).

Without drift every runnable task of both packs certifies; with relabel drift certify names the
broken step and its selector, and `run --certified` runs only what was certified. Evidence of
what the phone did comes from the phone's own input log.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from devices.certify import Certificate, certify
from devices.rig import load_rig, parse_rig
from devices.targets import run_pack
from devices.virtual import VirtualPhoneHost
from realbench.cli import app as cli_app
from realbench.taskpack import load_pack

pytestmark = [pytest.mark.farm, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[1]
PACKS = {"train_ticketing": ROOT / "taskpacks" / "train_ticketing", "bank": ROOT / "taskpacks" / "bank"}
VIRTUAL = load_rig(ROOT / "rigs" / "virtual.yaml")


def rig_dict(phones: list[Any]) -> dict[str, Any]:
    """The virtual rig's apps and accounts (with their fixtures), on the phones given."""
    accounts = [a.model_dump(mode="json", exclude_none=True) for a in VIRTUAL.accounts]
    return {
        "name": "certify-test",
        "phones": [
            {
                "serial": p.serial,
                "profile": "generic-1080x2400",
                "virtual": True,
                "control_url": p.control_url,
                "accounts": [a["name"] for a in accounts],
            }
            for p in phones
        ],
        "apps": [a.model_dump(mode="json", exclude_none=True) for a in VIRTUAL.apps],
        "accounts": accounts,
    }


@pytest.fixture(scope="module")
def relabel_phone() -> Iterator[Any]:
    with VirtualPhoneHost() as host:
        try:
            (info,) = host.start(1, screens="clone", drift="relabel")
        except Exception as exc:  # Chromium missing: this tier needs it
            pytest.skip(f"clone screens unavailable: {exc}")
        host.adb_connect()
        yield host, info


def test_relabel_drift_names_the_broken_step_and_selector(relabel_phone: Any, tmp_path: Path) -> None:
    host, info = relabel_phone
    rig_file = tmp_path / "rig.yaml"
    rig_file.write_text(yaml.safe_dump(rig_dict([info]), allow_unicode=True), encoding="utf-8")
    tasks = "lookup-passenger-count,lookup-earliest-train,passenger-delete"
    out = tmp_path / "cert"
    result = CliRunner().invoke(
        cli_app,
        [
            "certify",
            "--rig",
            str(rig_file),
            "--pack",
            str(PACKS["train_ticketing"]),
            "--tasks",
            tasks,
            "--json",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output.strip().splitlines()[-1])
    rows = {r["task"]: r for r in summary["tasks"]}
    assert summary["total"] == 3 and summary["certified"] == 1
    broken = rows["lookup-passenger-count"]
    assert broken["runnable"] and not broken["certified"]
    assert broken["failed_step"] == "golden.1"
    assert "常用乘车人" in broken["reason"]  # the relabelled text the recipe taps
    # the evidence id of the real query button survives the relabel of its text
    assert rows["lookup-earliest-train"]["certified"], rows["lookup-earliest-train"]
    assert not rows["passenger-delete"]["runnable"] and rows["passenger-delete"]["reason"]
    cert = Certificate.model_validate_json((out / "certification.json").read_text(encoding="utf-8"))
    full = next(r for r in cert.results if r.task == "lookup-passenger-count")
    step = next(s for s in full.steps if s.phase == "golden" and s.index == 1)
    assert step.found is False and "常用乘车人" in step.selector and step.screenshot
    assert (out / step.screenshot).exists() and (out / str(step.hierarchy)).exists()
    ok = next(r for r in cert.results if r.task == "lookup-earliest-train")
    assert all(s.found for s in ok.steps if s.selector)
    # the tap targets are unique; the answer is read off the first of many train numbers
    assert all(s.unique for s in ok.steps if s.kind in ("tap", "wait_for"))
    assert [s.unique for s in ok.steps if s.kind == "answer"] == [False]
    page = (out / f"{info.serial.replace(':', '_')}.html").read_text(encoding="utf-8")
    assert "lookup-passenger-count" in page and "golden.1" in page

    # `run --certified` runs only the certified task, and the skipped ones are listed with why
    before = len(host.phone(info.serial).events)
    summary_run = run_pack(
        pack_path=PACKS["train_ticketing"],
        out=tmp_path / "run",
        target="real",
        agent="golden",
        tasks=tasks,
        rig=rig_file,
        progress=False,
        real_gate={"certified": out},
    )
    gate = summary_run["real_gate"]
    assert set(gate["skipped"]) == {"lookup-passenger-count", "passenger-delete"}
    assert _tasks_run(tmp_path / "run") == {"lookup-earliest-train"}
    assert host.phone(info.serial).events.events(before), "the certified task never reached the phone"


def test_bank_recipes_certify_under_relabel_drift(relabel_phone: Any, tmp_path: Path) -> None:
    _, info = relabel_phone
    rig = parse_rig(rig_dict([info]))
    pack = load_pack(PACKS["bank"])
    cert = certify(rig, pack, tmp_path / "cert", task_ids=["balance_main_card", "transfer_saved_payee"])
    rows = {r.task: r for r in cert.results}
    assert rows["balance_main_card"].certified and rows["balance_main_card"].answer_readable
    transfer = rows["transfer_saved_payee"]
    assert transfer.certified and transfer.boundary_reached, transfer.reason


def _tasks_run(store_dir: Path) -> set[str]:
    from realbench.store import RunStore

    with RunStore(store_dir, create=False) as store:
        return {key.task for run in store.runs() for key in store.attempts(run["run_id"])}


@pytest.mark.slow
def test_without_drift_every_runnable_task_of_both_packs_certifies(tmp_path: Path) -> None:
    with VirtualPhoneHost() as host:
        try:
            phones = host.start(2, screens="clone", drift="none")
        except Exception as exc:
            pytest.skip(f"clone screens unavailable: {exc}")
        host.adb_connect()
        t0 = time.perf_counter()

        def one(args: tuple[str, Any]) -> Certificate:
            name, phone = args
            return certify(parse_rig(rig_dict([phone])), load_pack(PACKS[name]), tmp_path / name)

        with ThreadPoolExecutor(2) as pool:
            certs = list(pool.map(one, zip(sorted(PACKS), phones, strict=True)))
        took = time.perf_counter() - t0
    failures = []
    runnable = 0
    for cert in certs:
        for r in cert.results:
            runnable += r.runnable
            if r.runnable and not r.certified:
                failures.append(f"{cert.app}/{r.task}: {r.failed_step} {r.reason}")
    print(f"certified {runnable - len(failures)} of {runnable} runnable tasks in {took:.0f} s")
    assert runnable >= 100
    assert failures == []
