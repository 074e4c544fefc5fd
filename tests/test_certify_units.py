"""certify's bookkeeping without phones: what is runnable, what a certificate grants, its page."""

from __future__ import annotations

from pathlib import Path

from devices.certify import (
    Certificate,
    CertResult,
    CertStep,
    PhoneCert,
    load_certificate,
    not_runnable_reason,
    write_phone_page,
)
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
            CertResult(task="t1", phone="A", runnable=True, certified=True),
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
    assert set(summary["tasks"][0]) == {"task", "phone", "runnable", "certified", "failed_step", "reason"}
    cert.write(tmp_path)
    assert load_certificate(tmp_path).certified_for("A", "6.3.2") == {"t1"}
    page = write_phone_page(cert, cert.phones[0], tmp_path).read_text(encoding="utf-8")
    assert "golden.1" in page and "&lt;b&gt;" in page and "<b>" not in page
