"""`realbench certify` on virtual phones whose apps are the clones (Chromium screens).

Without drift every runnable task of both packs certifies; with relabel drift certify names the
broken step and its selector, and `run --certified` runs only what was certified. Evidence of
what the phone did comes from the phone's own input log.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from devices.certify import Certificate, certify
from devices.certify_sample import runnable_tasks, stratified_subset, task_features
from devices.pack_run import run_pack
from devices.rig import load_rig, parse_rig, rig_on_phones
from devices.virtual import VirtualPhoneHost
from realbench.cli import app as cli_app
from realbench.errors import PreflightError
from realbench.run_config import RunConfig
from realbench.taskpack import load_pack

pytestmark = [pytest.mark.farm, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[1]
PACKS = {"train_ticketing": ROOT / "taskpacks" / "train_ticketing", "bank": ROOT / "taskpacks" / "bank"}
VIRTUAL = load_rig(ROOT / "rigs" / "virtual.yaml")


def rig_dict(phones: list[Any]) -> dict[str, Any]:
    """The virtual rig's apps and accounts (with their fixtures), on the phones given."""
    return rig_on_phones(VIRTUAL, phones, name="certify-test")


@pytest.fixture(scope="module")
def farm() -> Iterator[tuple[VirtualPhoneHost, list[Any]]]:
    """One phone whose apps carry relabel drift, two without drift."""
    with VirtualPhoneHost() as host:
        try:
            phones = host.start(3, screens="clone", drift=["relabel", "none", "none"])
        except Exception as exc:  # Chromium missing: this tier needs it
            pytest.skip(f"clone screens unavailable: {exc}")
        host.adb_connect()
        yield host, phones


@pytest.fixture(scope="module")
def relabel_phone(farm: tuple[VirtualPhoneHost, list[Any]]) -> tuple[VirtualPhoneHost, Any]:
    host, phones = farm
    return host, phones[0]


def test_relabel_drift_names_the_broken_step_and_selector(relabel_phone: Any, tmp_path: Path) -> None:
    host, info = relabel_phone
    rig_file = tmp_path / "rig.yaml"
    rig_file.write_text(yaml.safe_dump(rig_dict([info]), allow_unicode=True), encoding="utf-8")
    tasks = "lookup-passenger-count,lookup-earliest-train,settings-push-off"
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
    assert result.exit_code == 1, result.output  # a runnable task did not certify
    summary = json.loads(result.output.strip().splitlines()[-1])
    rows = {r["task"]: r for r in summary["tasks"]}
    assert summary["total"] == 3 and summary["certified"] == 1
    broken = rows["lookup-passenger-count"]
    assert broken["runnable"] and not broken["certified"]
    assert broken["failed_step"] == "golden.1"
    assert "常用乘车人" in broken["reason"]  # the relabelled text the recipe taps
    # the evidence id of the real query button survives the relabel of its text
    assert rows["lookup-earliest-train"]["certified"], rows["lookup-earliest-train"]
    assert not rows["settings-push-off"]["runnable"] and rows["settings-push-off"]["reason"]
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
        RunConfig(
            pack=PACKS["train_ticketing"],
            out=tmp_path / "run",
            target="real",
            agent="golden",
            tasks=tasks,
            rig=rig_file,
            progress=False,
            certified=out,
        )
    )
    gate = summary_run["real_gate"]
    assert "lookup-passenger-count" in gate["skipped"]
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


@pytest.mark.timeout(600)
def test_without_drift_a_stratified_subset_of_both_packs_certifies(
    farm: tuple[VirtualPhoneHost, list[Any]], tmp_path: Path
) -> None:
    """Every feature of the runnable tasks, each app included, certifies without drift (all 136
    runnable tasks: `make certify-all`)."""
    _, (_, *plain) = farm
    loaded = {name: load_pack(path) for name, path in PACKS.items()}
    fixtures = {a.app: a.fixture for a in VIRTUAL.accounts}
    subset = stratified_subset((p, fixtures[p.real_app.package]) for p in loaded.values())
    every = set().union(
        *(
            task_features(p, t)
            for p in loaded.values()
            for t in runnable_tasks(p, fixtures[p.real_app.package])
        )
    )
    assert set().union(*(s.covers for s in subset)) == every
    assert {s.app for s in subset} == set(PACKS) and len(subset) <= 12
    assert {"setup:tap", "setup:expect", "golden:answer", "golden:type", "boundary", "manual"} <= every
    t0 = time.perf_counter()

    def one(args: tuple[str, Any]) -> Certificate:
        name, phone = args
        ids = [s.task for s in subset if s.app == name]
        return certify(parse_rig(rig_dict([phone])), loaded[name], tmp_path / name, task_ids=ids)

    with ThreadPoolExecutor(2) as pool:
        certs = list(pool.map(one, zip(sorted(PACKS), plain, strict=True)))
    took = time.perf_counter() - t0
    rows = [r for cert in certs for r in cert.results]
    print(f"certified {sum(r.certified for r in rows)} of {len(rows)} sampled tasks in {took:.0f} s")
    assert len(rows) == len(subset) and all(r.runnable for r in rows)
    assert [f"{r.task}: {r.failed_step} {r.reason}" for r in rows if not r.certified] == []
    for cert in certs:
        for r in cert.results:
            if loaded[cert.app].task(r.task).real.boundary:
                assert r.boundary_reached, r.task  # the interlock stopped the commit tap


def test_run_certified_runs_each_task_only_on_the_phones_it_certified_on(
    farm: tuple[VirtualPhoneHost, list[Any]], tmp_path: Path
) -> None:
    host, (relabel, plain, _) = farm
    rig_file = tmp_path / "rig.yaml"
    rig_file.write_text(yaml.safe_dump(rig_dict([relabel, plain]), allow_unicode=True), encoding="utf-8")
    both = "lookup-passenger-count,lookup-earliest-train"
    out = tmp_path / "cert"
    result = CliRunner().invoke(
        cli_app,
        ["certify", "--rig", str(rig_file), "--pack", str(PACKS["train_ticketing"])]
        + ["--tasks", both, "--json", "--out", str(out)],
    )
    assert result.exit_code == 1, result.output
    rows = {(r["phone"], r["task"]): r for r in json.loads(result.output.strip().splitlines()[-1])["tasks"]}
    assert rows[(relabel.serial, "lookup-passenger-count")]["failed_step"] == "golden.1"
    assert all(
        rows[(s, t)]["certified"] for s, t in rows if (s, t) != (relabel.serial, "lookup-passenger-count")
    )

    def run(tasks: str, store: Path, repeats: int) -> tuple[dict[str, Any], dict[str, list[Any]]]:
        phones = {p.serial: host.phone(p.serial) for p in (relabel, plain)}
        before = {s: len(p.events) for s, p in phones.items()}
        summary = run_pack(
            RunConfig(
                pack=PACKS["train_ticketing"],
                out=store,
                target="real",
                agent="golden",
                tasks=tasks,
                repeats=repeats,
                rig=rig_file,
                progress=False,
                certified=out,
            )
        )
        inputs = {s: p.events.events(before[s]) for s, p in phones.items()}  # the phones' own input logs
        return summary, inputs

    # the task that failed on the relabelled phone runs only on the phone it certified on
    summary, inputs = run("lookup-passenger-count", tmp_path / "run1", repeats=2)
    assert inputs[relabel.serial] == [], "a task ran on a phone it did not certify on"
    assert inputs[plain.serial] and summary["episodes"] == 2
    assert _serials(tmp_path / "run1") == {plain.serial}

    # the other phone's app is updated away from the pin: the pre-run version check refuses the whole
    # run before any input reaches a phone (which certified tasks an updated phone keeps is the
    # certificate's rule, tested in tests/test_certify_units.py for pins that moved on)
    version = host.phone(plain.serial)
    version.faults.versions["com.MobileTicket"] = "5.9.0.0"
    before = {p.serial: len(host.phone(p.serial).events) for p in (relabel, plain)}
    try:
        with pytest.raises(PreflightError, match=rf"{re.escape(plain.serial)}: com.MobileTicket is 5.9.0.0"):
            run(both, tmp_path / "run2", repeats=1)
    finally:
        version.faults.versions.pop("com.MobileTicket")
    for p in (relabel, plain):
        assert host.phone(p.serial).events.events(before[p.serial]) == [], "input reached a phone"
    assert not (tmp_path / "run2" / "summary.json").exists()


def _serials(store_dir: Path) -> set[str]:
    from realbench.store import RunStore

    with RunStore(store_dir, create=False) as store:
        return set(store.episodes_frame()["device_serial"])


def test_a_phone_with_another_app_version_fails_its_health_check(relabel_phone: Any, tmp_path: Path) -> None:
    host, info = relabel_phone
    phone = host.phone(info.serial)
    phone.faults.versions["com.MobileTicket"] = "5.9.0.0"
    try:
        unpinned = {**rig_dict([info]), "apps": []}  # only the pack's own pin applies
        cert = certify(
            parse_rig(unpinned),
            load_pack(PACKS["train_ticketing"]),
            tmp_path,
            task_ids=["lookup-member-points"],
        )
    finally:
        phone.faults.versions.pop("com.MobileTicket")
    (row,) = cert.results
    assert not row.certified and row.failed_step == "environment"
    assert "5.9.0.0" in row.reason and "the pack's recipes are for 5.8.0.8" in row.reason
    assert cert.certified_for(info.serial, "5.9.0.0") == set()


def test_a_setup_check_that_fails_makes_an_unscored_abort(relabel_phone: Any, tmp_path: Path) -> None:
    from devices.farm.rig_targets import targets_from_rig
    from realbench.episode import run_episode
    from realbench.golden import GoldenAgent
    from realbench.outcome import Outcome
    from realbench.recipes import WaitForStep

    host, info = relabel_phone
    pack = load_pack(PACKS["train_ticketing"])
    task = pack.task("lookup-member-points")
    broken = task.model_copy(
        update={
            "real": task.real.model_copy(
                update={
                    "setup": [
                        WaitForStep.model_validate(
                            {"do": "wait_for", "selector": {"text": "会员中心"}, "timeout_s": 1}
                        )
                    ]
                }
            )
        }
    )
    with targets_from_rig(parse_rig(rig_dict([info])), pack, "real") as targets:
        target = targets[0]
        instance = target.instantiate(broken, 0)
        before = len(host.phone(info.serial).events)
        result = run_episode(instance, target, GoldenAgent(real_side=True))
        target.after_episode(result)
    assert result.outcome is Outcome.ENV_INVALID
    assert "setup step 0" in str(result.error) and "会员中心" in str(result.error)
    assert result.steps == []  # the agent never got a turn
    # what reached the phone is the logged-in probe's two tab taps (我的, 首页), nothing more
    taps = [e for e in host.phone(info.serial).events.events(before) if e.kind == "tap"]
    assert len(taps) == 2, taps


def test_every_setup_step_kind_runs_under_certify(
    farm: tuple[VirtualPhoneHost, list[Any]], tmp_path: Path
) -> None:
    """The packs' recipes use only `wait_for` and `tap` in setup; the other kinds (launch, back,
    home, type, scroll, `expect` exists/absent) run here on a bank task whose setup walks the golden
    plan's first half. `deep_link` is not among them: the virtual phones open only clone-server
    page links."""
    host, (_, _, plain) = farm
    pack = load_pack(PACKS["bank"])
    task = pack.task("salary_card_income_feb")
    real = task.real.model_dump(mode="json", exclude_none=True)
    home = {"text_contains": "总资产"}
    real["setup"] = [
        {"do": "launch"},
        {"do": "wait_for", "selector": home},
        {"do": "tap", "selector": {"resource_id": "qa_open_history"}},
        {"do": "back", "expect": [{"selector": home}]},
        {"do": "home", "expect": [{"selector": home, "state": "absent"}]},
        {"do": "launch", "expect": [{"selector": home}]},
        {"do": "tap", "selector": {"resource_id": "qa_open_history"}},
        {"do": "tap", "selector": {"resource_id": "hist_acc_a2"}},
        {"do": "tap", "selector": {"resource_id": "btn_filter"}},
        {"do": "type", "text": "2026-02-01", "into": {"resource_id": "start"}},
        {"do": "scroll", "selector": {"resource_id": "btn_filter_apply"}, "direction": "up"},
    ]
    kinds = {step["do"] for step in real["setup"]}
    assert kinds == {"launch", "wait_for", "tap", "back", "home", "type", "scroll"}
    real["golden"] = real["golden"][4:]  # from typing the end date on
    walked = task.model_copy(update={"real": type(task.real).model_validate(real)})
    custom = pack.model_copy(update={"tasks": [walked if t.id == task.id else t for t in pack.tasks]})
    cert = certify(parse_rig(rig_dict([plain])), custom, tmp_path, task_ids=[task.id])
    (row,) = cert.results
    assert row.certified and row.answer_readable, (row.failed_step, row.reason)
    setup = [s for s in row.steps if s.phase == "setup"]
    assert [s.kind for s in setup] == [step["do"] for step in real["setup"]] and all(s.ok for s in setup)
    assert all(s.found and s.unique for s in setup if s.kind in ("tap", "type", "wait_for"))
