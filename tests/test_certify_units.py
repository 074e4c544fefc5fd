"""certify's bookkeeping without phones: what is runnable, what a certificate grants, its page."""

from __future__ import annotations

from pathlib import Path

import pytest

from devices.certify import (
    Certificate,
    CertResult,
    CertStep,
    PhoneCert,
    load_certificate,
    not_runnable_reason,
    write_phone_page,
)
from realbench.errors import ConfigError
from realbench.recipes import AccountFixture
from realbench.taskpack import load_pack

ROOT = Path(__file__).resolve().parents[1]
TRAIN = load_pack(ROOT / "taskpacks" / "train_ticketing")
BANK = load_pack(ROOT / "taskpacks" / "bank")


def test_what_is_runnable() -> None:
    full = AccountFixture(passengers=["李明", "王芳", "陈静"], facts=["sold-out-train", "clone-timetable"])
    assert (
        not_runnable_reason(TRAIN.task("lookup-earliest-train"), None, virtual=False, confirm_manual=False)
        is None
    )
    no_plan = not_runnable_reason(TRAIN.task("settings-push-off"), full, virtual=True, confirm_manual=True)
    assert no_plan
    gap = not_runnable_reason(
        TRAIN.task("waitlist-sold-out"),
        AccountFixture(passengers=["李明"]),
        virtual=True,
        confirm_manual=False,
    )
    assert gap and "sold-out-train" in gap
    manual = TRAIN.task("pay-unpaid-order")
    assert manual.real.manual
    why = not_runnable_reason(manual, full, virtual=False, confirm_manual=False)
    assert why and "--confirm-manual" in why
    assert not_runnable_reason(manual, full, virtual=False, confirm_manual=True) is None
    assert not_runnable_reason(manual, full, virtual=True, confirm_manual=False) is None


def _cert() -> Certificate:
    return Certificate(
        pack="p",
        app="bank",
        package="com.chinamworld.main",
        pack_app_version="6.3.2",
        rig="r",
        created="2026-01-01T00:00:00+00:00",
        phones=[PhoneCert(serial="A", app_version="6.3.2"), PhoneCert(serial="B", app_version="6.3.2")],
        results=[
            CertResult(
                task="t1", phone="A", runnable=True, certified=True, evidence="50% of 4 real steps <x>"
            ),
            CertResult(
                task="t2",
                phone="A",
                runnable=True,
                failed_step="golden.1",
                reason="no control matches <b>",
                steps=[CertStep(phase="golden", index=1, kind="tap", selector="text=x", found=False)],
            ),
            CertResult(task="t1", phone="B", runnable=False, reason="not allowed"),
        ],
    )


def test_certificate_grants_per_phone_and_app_version(tmp_path: Path) -> None:
    cert = _cert()
    assert cert.certified_for("A", "6.3.2") == {"t1"}
    assert cert.certified_for("A", "6.4.0") == set()
    assert cert.certified_for("B", "6.3.2") == set()
    assert cert.certified_for("C", "6.3.2") == set()
    summary = cert.summary()
    assert summary["certified"] == 1 and summary["total"] == 3
    assert set(summary["tasks"][0]) == {
        "task",
        "phone",
        "runnable",
        "certified",
        "failed_step",
        "reason",
        "evidence",
    }
    cert.write(tmp_path)
    assert load_certificate(tmp_path).certified_for("A", "6.3.2") == {"t1"}
    page = write_phone_page(cert, cert.phones[0], tmp_path).read_text(encoding="utf-8")
    assert "golden.1" in page and "&lt;b&gt;" in page and "<b>" not in page
    assert "evidence: 50% of 4 real steps &lt;x&gt;" in page  # each task's evidence, escaped


def test_certify_exits_non_zero_when_a_runnable_task_fails() -> None:
    cert = _cert()
    assert [r.task for r in cert.failed()] == ["t2"]
    assert cert.exit_code() == 1
    passing = cert.model_copy(update={"results": [r for r in cert.results if r.task != "t2"]})
    assert passing.exit_code() == 0  # a task that is not runnable is skipped, not failed


class _Phone:
    """A phone that only reports its app version (test double for the gate's bookkeeping)."""

    def __init__(self, version: str | None) -> None:
        self.version = version

    def app_version(self, package: str) -> str | None:
        return self.version


class _Pool:
    def __init__(self, versions: dict[str, str | None]) -> None:
        self.phones = {s: _Phone(v) for s, v in versions.items()}

    def phone(self, serial: str) -> _Phone:
        return self.phones[serial]


class _Target:
    def __init__(self, pool: _Pool, serial: str) -> None:
        self.pool, self.serial = pool, serial


def test_run_certified_is_per_phone_and_app_version(tmp_path: Path) -> None:
    from devices.real_gate import apply_certificate
    from realbench.store import EpisodeKey

    cert = _cert()
    cert.phones.append(PhoneCert(serial="C", app_version="6.3.2"))
    cert.results += [
        CertResult(task="t1", phone="C", runnable=True, certified=True),
        CertResult(task="t2", phone="C", runnable=True, certified=True),
    ]
    cert.write(tmp_path)
    pool = _Pool({"A": "6.3.2", "B": "6.3.2", "C": "6.3.2"})
    targets = [_Target(pool, s) for s in ("A", "B", "C")]
    run = apply_certificate(tmp_path, targets, ["t1", "t2", "t3"])
    assert [t.serial for t in run.targets] == ["A", "C"]  # B has nothing certified
    assert run.grants == {"A": {"t1"}, "C": {"t1", "t2"}}
    assert run.task_ids == ["t1", "t2"]
    t2 = EpisodeKey(task="t2", seed=0, repeat=0)
    assert not run.may_run(targets[0], t2) and run.may_run(targets[2], t2)
    (t3,) = run.skipped
    assert t3.task == "t3" and "A: the task was not certified on this phone" in t3.reason
    # C updated its app: what was certified for the old version does not run there any more
    pool.phones["C"].version = "6.4.0"
    run = apply_certificate(tmp_path, targets, ["t1", "t2"])
    assert [t.serial for t in run.targets] == ["A"] and run.task_ids == ["t1"]
    (t2_skip,) = run.skipped
    assert "A: failed at golden.1" in t2_skip.reason
    assert "C: certified at app version 6.3.2, the phone has 6.4.0" in t2_skip.reason
    assert "B: the task was not certified on this phone" in t2_skip.reason
    pool.phones["A"].version = None  # the version cannot be read: nothing is granted
    with pytest.raises(ConfigError, match="no phone of this rig is certified"):
        apply_certificate(tmp_path, targets, ["t1", "t2"])
