"""Rigs, profiles, the phone driver, health checks, leases, quarantine and the runner on a farm.

Unit tests (no phone) first; then `farm` tests on virtual phones through the real adb server.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devices.farm.health import CheckStatus, HealthPolicy, check_phone
from devices.farm.pool import LeaseTimeout, PhonePool, lease_holder_pid
from devices.farm.rig_targets import farm_pool, targets_from_rig
from devices.phone import PhoneDevice, RetryPolicy, is_black
from devices.profile import load_profile, profile_names
from devices.rig import PhoneSpec, Rig, load_rig, parse_rig
from devices.secrets import MASK, Redactor
from realbench.actions import Click, Key, KeyPress, Swipe, Type
from realbench.errors import ConfigError, DeviceError, DeviceLost, UnknownNameError
from realbench.golden import GoldenAgent
from realbench.hierarchy import Selector
from realbench.outcome import Outcome
from realbench.runner import LocalRunner, plan_episodes
from realbench.store import RunStore
from tests.farm_support import BANK, TICKET, tiny_pack, virtual_phones

ROOT = Path(__file__).resolve().parents[1]


def static_rig(count: int = 2, **extra: Any) -> Rig:
    raw: dict[str, Any] = {
        "name": "static-test",
        "virtual": {"count": count, "screens": "static", "drift": "none"},
        "apps": [{"package": TICKET, "version": "5.8.0.8"}],
        "concurrency": {"quarantine_after": 2, "lease_timeout_s": 5},
    }
    raw.update(extra)
    return parse_rig(raw)


# --- rigs, profiles, secrets (no phone) ---------------------------------------------------------


def test_shipped_rigs_and_profiles_load() -> None:
    assert {"generic-1080x2400", "xiaomi-miui", "huawei-emui"} <= set(profile_names())
    for name in profile_names():
        profile = load_profile(name)
        assert profile.screen.width > 0 and profile.ime
    virtual = load_rig(ROOT / "rigs" / "virtual.yaml")
    assert virtual.is_virtual and virtual.virtual is not None and virtual.virtual.count >= 1
    lab = load_rig(ROOT / "rigs" / "example-lab.yaml")
    assert {p.host for p in lab.phones} == {"lab-a", "lab-b"}
    assert all(n.startswith("RB_") for n in lab.env_names())


@pytest.mark.parametrize(
    "account",
    [
        {"name": "a", "app": BANK, "password": "hunter22"},
        {"name": "a", "app": BANK, "pay_pin": "123456"},
        {"name": "a", "app": BANK, "password_env": "hunter22"},  # a value where a NAME belongs
    ],
)
def test_rig_with_a_literal_secret_is_refused(account: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as info:
        parse_rig(
            {"name": "x", "phones": [{"serial": "s1", "profile": "generic-1080x2400"}], "accounts": [account]}
        )
    assert "hunter22" not in str(info.value) and "123456" not in str(info.value)


def test_rig_problems_are_named() -> None:
    with pytest.raises(ConfigError, match="host 'nowhere'"):
        parse_rig(
            {"name": "x", "phones": [{"serial": "s1", "profile": "generic-1080x2400", "host": "nowhere"}]}
        )
    with pytest.raises(UnknownNameError):
        parse_rig({"name": "x", "phones": [{"serial": "s1", "profile": "no-such-phone"}]})
    with pytest.raises(ConfigError, match="unique"):
        parse_rig({"name": "x", "phones": [{"serial": "s1", "profile": "generic-1080x2400"}] * 2})
    rig = parse_rig(
        {
            "name": "x",
            "phones": [{"serial": "s1", "profile": "generic-1080x2400"}],
            "apps": [{"package": "com.ex.app"}],
        }
    )
    assert rig.app_pin("com.ex.app") is not None and rig.app_pin("com.other") is None


def test_a_host_without_an_adb_port_uses_the_one_adb_would(monkeypatch: pytest.MonkeyPatch) -> None:
    """$ANDROID_ADB_SERVER_PORT, as the adb command reads it; 5037 without it; a host's own wins."""
    phones = [{"serial": "s1", "profile": "generic-1080x2400"}]
    monkeypatch.delenv("ANDROID_ADB_SERVER_PORT", raising=False)
    assert parse_rig({"name": "x", "phones": phones}).hosts[0].adb_port == 5037
    monkeypatch.setenv("ANDROID_ADB_SERVER_PORT", "5123")
    assert parse_rig({"name": "x", "phones": phones}).hosts[0].adb_port == 5123
    own = {"name": "x", "hosts": [{"name": "local", "adb_port": 6000}], "phones": phones}
    assert parse_rig(own).hosts[0].adb_port == 6000
    monkeypatch.setenv("ANDROID_ADB_SERVER_PORT", "adb")
    with pytest.raises(ConfigError, match="not a port"):
        parse_rig({"name": "x", "phones": phones})


def test_credentials_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    rig = parse_rig(
        {
            "name": "x",
            "phones": [{"serial": "s1", "profile": "generic-1080x2400", "accounts": ["bank"]}],
            "accounts": [
                {"name": "bank", "app": BANK, "username_env": "RB_T_USER", "password_env": "RB_T_PASS"}
            ],
        }
    )
    monkeypatch.delenv("RB_T_PASS", raising=False)
    assert rig.missing_env() == ["RB_T_PASS", "RB_T_USER"]
    with pytest.raises(ConfigError, match="RB_T_USER"):
        rig.account("bank").credentials()
    monkeypatch.setenv("RB_T_USER", "alice")
    monkeypatch.setenv("RB_T_PASS", "s3cret-pass")
    assert rig.account("bank").credentials() == {"username": "alice", "password": "s3cret-pass"}
    assert "s3cret-pass" not in rig.model_dump_json()
    red = Redactor(rig.secret_values())
    # usernames are personal data too
    assert red.redact("typed s3cret-pass for alice") == f"typed {MASK} for {MASK}"
    encoded = base64.b64encode(b"s3cret-pass").decode()
    assert red.redact(f"am broadcast --es text {encoded}") == f"am broadcast --es text {MASK}"


def test_black_frame_detection() -> None:
    import io

    from PIL import Image

    def jpeg(color: tuple[int, int, int], stripe: bool = False) -> bytes:
        img = Image.new("RGB", (1080, 2400), color)
        if stripe:  # a dark-mode screen: black, with some text on it
            img.paste((230, 230, 230), (100, 1000, 900, 1040))
        buf = io.BytesIO()
        img.save(buf, "JPEG")
        return buf.getvalue()

    assert is_black(jpeg((0, 0, 0)))
    assert not is_black(jpeg((30, 30, 30)))
    assert not is_black(jpeg((0, 0, 0), stripe=True))


# --- one phone, through the real adb server ------------------------------------------------------


@pytest.fixture(scope="module")
def phones() -> Iterator[tuple[Any, list[str]]]:
    with virtual_phones(2) as (host, serials):
        yield host, serials


def fast() -> RetryPolicy:
    return RetryPolicy(attempts=3, backoff_s=0.05, read_timeout_s=3, act_timeout_s=3, reconnect_timeout_s=5)


@pytest.mark.farm
def test_phone_observes_and_acts(phones: tuple[Any, list[str]]) -> None:
    host, serials = phones
    vphone = host.phone(serials[0])
    phone = PhoneDevice(serials[0], virtual=True, retry=fast())
    assert phone.size() == (1080, 2400)
    phone.start_app(TICKET)
    obs = phone.observe()
    assert obs.app == TICKET and obs.screenshot.width == 1080 and obs.screenshot.data[:2] == b"\xff\xd8"
    assert "我的订单" in (obs.hierarchy or "")
    before = len(vphone.events)
    phone.act(Click(x=500, y=150))
    phone.act(Swipe(x=500, y=700, x2=500, y2=300, duration_ms=100))
    phone.act(KeyPress(key=Key.BACK))
    events = vphone.events.events(before)
    assert [e.kind.value for e in events] == ["tap", "swipe", "key"]
    assert (events[0].x, events[0].y) == phone.to_pixels(500, 150)
    assert phone.describe()["kind"] == "virtual-phone"
    phone.close()
    with pytest.raises(DeviceLost):
        phone.observe()


@pytest.mark.farm
def test_typing_uses_and_clears_the_clipboard(phones: tuple[Any, list[str]]) -> None:
    host, serials = phones
    vphone = host.phone(serials[0])
    phone = PhoneDevice(serials[0], virtual=True, retry=fast())
    phone.start_app(TICKET)
    phone.act(Click(x=500, y=134))  # the search field
    phone.act(Type(text="北京南"))
    assert any(e.text == "北京南" for e in vphone.events.events())
    assert vphone.ui.clipboard in ("", None), "a typed text stayed on the phone's clipboard"


@pytest.mark.farm
def test_recovers_from_killed_server_and_dropped_link(phones: tuple[Any, list[str]]) -> None:
    host, serials = phones
    vphone = host.phone(serials[1])
    # what is tested is that the driver recovers, not how fast: adb may report the dropped link's
    # device offline for a few seconds on a loaded machine, longer than fast()'s three quick tries
    patient = RetryPolicy(
        attempts=6, backoff_s=0.5, read_timeout_s=3, act_timeout_s=3, reconnect_timeout_s=10
    )
    phone = PhoneDevice(serials[1], virtual=True, retry=patient)
    phone.observe()
    assert vphone.kill_uiautomator()
    phone.observe()  # uiautomator2 restarts its server itself on a refused connection
    vphone.drop_connection()
    obs = phone.observe()  # the adb transport is gone: reattached by the driver
    assert obs.screenshot.width == 1080
    assert phone.stats.calls > 0


@pytest.mark.farm
def test_black_and_slow_screens(phones: tuple[Any, list[str]]) -> None:
    host, serials = phones
    vphone = host.phone(serials[1])
    phone = PhoneDevice(
        serials[1],
        virtual=True,
        retry=RetryPolicy(attempts=2, backoff_s=0.05, read_timeout_s=1.0, black_frame_retries=1),
    )
    vphone.set_faults(black_screenshots=True)
    try:
        with pytest.raises(DeviceError, match="black"):
            phone.screenshot()
    finally:
        vphone.set_faults(black_screenshots=False)
    assert phone.stats.black_frames == 2
    vphone.set_faults(screenshot_delay_s=3.0)
    t0 = time.monotonic()
    try:
        with pytest.raises(DeviceError):
            phone.screenshot()
    finally:
        vphone.set_faults(screenshot_delay_s=0.0)
    assert time.monotonic() - t0 < 8, "a slow screenshot must time out, not hang"
    assert phone.screenshot()[:2] == b"\xff\xd8"


@pytest.mark.farm
def test_health_check_repairs_and_reports(phones: tuple[Any, list[str]]) -> None:
    host, serials = phones
    vphone = host.phone(serials[0])
    phone = PhoneDevice(serials[0], virtual=True, retry=fast())
    profile = load_profile("generic-1080x2400")
    good_ime = vphone.ime_current
    vphone.imes.append("com.github.uiautomator/.AdbKeyboard")
    vphone.ime_current = "com.github.uiautomator/.AdbKeyboard"  # as a typing session might leave it
    phone.act(KeyPress(key=Key.HOME))
    vphone.ui.screen_on = False
    policy = HealthPolicy(profile=profile, pins={TICKET: "5.8.0.8"}, expected_ime=good_ime)
    report = check_phone(phone, policy)
    status = {i.name: i.status for i in report.items}
    assert report.ok, report.summary()
    assert status["screen_on"] is CheckStatus.FIXED and vphone.ui.screen_on
    assert status["ime"] is CheckStatus.FIXED and vphone.ime_current == good_ime
    vphone.set_faults(versions={TICKET: "5.9.0.1"})
    try:
        report = check_phone(phone, policy)
    finally:
        vphone.set_faults(versions={})
    assert not report.ok and "5.9.0.1" in report.summary()


# --- the pool ---------------------------------------------------------------------------------


@pytest.mark.farm
def test_leases_are_exclusive_and_time_out(phones: tuple[Any, list[str]], tmp_path: Path) -> None:
    _, serials = phones
    rig = static_rig()
    specs = [PhoneSpec(serial=s, profile="generic-1080x2400") for s in serials]
    pool = PhonePool(rig, specs, virtual=True, lease_dir=tmp_path)
    other = PhonePool(rig, specs, virtual=True, lease_dir=tmp_path)  # like a second process
    with pool.lease(serials[0], timeout=1):
        assert lease_holder_pid(serials[0], tmp_path) is not None
        with pytest.raises(LeaseTimeout):
            other.acquire(serials[0], timeout=0.3)
        got = other.acquire(timeout=0.5)  # "any phone" takes the free one
        assert got.serial == serials[1]
        got.release()
        released = threading.Event()

        def wait_for_it() -> None:
            with other.lease(serials[0], timeout=3):
                released.set()

        t = threading.Thread(target=wait_for_it)
        t.start()
        time.sleep(0.2)
        assert not released.is_set()
    t.join(timeout=5)
    assert released.is_set()
    assert lease_holder_pid(serials[0], tmp_path) is None
    pool.close()
    other.close()


def test_quarantine_after_consecutive_env_failures(tmp_path: Path) -> None:
    rig = static_rig()
    pool = PhonePool(
        rig, [PhoneSpec(serial="vp-1", profile="generic-1080x2400")], virtual=True, lease_dir=tmp_path
    )
    pool.record_outcome("vp-1", Outcome.ENV_INVALID)
    pool.record_outcome("vp-1", Outcome.FAILURE)  # an agent failure resets the streak
    pool.record_outcome("vp-1", Outcome.ENV_INVALID)
    assert not pool.record("vp-1").quarantined
    pool.record_outcome("vp-1", Outcome.ENV_INVALID, reason="DeviceLost: gone")
    rec = pool.record("vp-1")
    assert rec.quarantined and "gone" in rec.quarantine_reason
    assert rec.flake_rate == pytest.approx(3 / 4)
    with pytest.raises(LeaseTimeout, match="quarantined"):
        pool.acquire("vp-1", timeout=0.1)


# --- the runner on a farm ---------------------------------------------------------------------


@pytest.mark.farm
def test_runner_reruns_env_invalid_on_another_phone_and_quarantines(tmp_path: Path) -> None:
    rig = static_rig(2, concurrency={"quarantine_after": 1, "lease_timeout_s": 5})
    pack = tiny_pack(tasks=2, steps=1)
    store = RunStore(tmp_path / "store")
    store.ensure_run("r", pack=pack.app, app=pack.app, agent="golden", target="real", config={})
    with virtual_phones(2) as (host, serials):
        specs = [PhoneSpec(serial=s, profile="generic-1080x2400") for s in serials]
        bad = host.phone(serials[0])
        bad.set_faults(logged_out=[TICKET])  # this phone lost its login: every episode aborts
        pack_with_probe = pack.model_copy(deep=True)
        pack_with_probe.real_app.logged_in_probe = Selector(text="我的订单")
        with targets_from_rig(rig, pack_with_probe, "real", phones=specs) as targets:
            runner = LocalRunner(
                store, "r", pack_with_probe, targets, GoldenAgent, progress=False, max_attempts=3
            )
            summary = runner.run(plan_episodes(pack_with_probe, repeats=2)).data
            status = {t.serial: t.pool.record(t.serial) for t in targets}
    assert summary["episodes"] == 4 and summary["aborted"] == 0, summary
    assert summary["outcomes"].get("env_invalid", 0) >= 1
    assert summary["abort_rate"] > 0
    assert status[serials[0]].quarantined and status[serials[0]].env_failures == 1
    assert status[serials[1]].env_failures == 0 and status[serials[1]].episodes == 4
    frame = store.episodes_frame(["r"])
    finals = frame[frame["outcome"] != "env_invalid"]
    assert set(finals["device_serial"]) == {serials[1]}
    store.close()


@pytest.mark.farm
def test_farm_pool_starts_and_stops_virtual_phones() -> None:
    rig = static_rig(1)
    with farm_pool(rig, reuse_running=False) as pool:
        serial = pool.serials[0]
        assert pool.check(serial).ok
    import adbutils

    assert serial not in {d.serial for d in adbutils.adb.device_list()}


@pytest.mark.farm
def test_devices_command_lists_health_versions_and_leases(tmp_path: Path) -> None:
    from rich.console import Console

    from devices.farm.device_table import device_rows, render_table

    rig = static_rig(
        1, apps=[{"package": TICKET, "version": "5.8.0.8"}, {"package": BANK, "version": "0.0.1"}]
    )
    with virtual_phones(1) as (_, serials):
        rows = device_rows(
            parse_rig(
                {
                    **rig.model_dump(exclude={"virtual"}),
                    "phones": [{"serial": serials[0], "profile": "generic-1080x2400", "virtual": True}],
                }
            )
        )
    (row,) = rows
    assert row["serial"] == serials[0] and row["kind"] == "virtual-phone" and row["model"]
    assert row["apps"] == {TICKET: "5.8.0.8", BANK: "6.3.2"}
    assert "pinned 0.0.1" in row["health"]  # the drifted bank app fails the version check
    assert row["leased_by_pid"] is None and row["quarantined"] is False
    console = Console(record=True, width=200)
    console.print(render_table(rig.name, rows))
    assert serials[0] in console.export_text()


@pytest.mark.farm
@pytest.mark.filterwarnings("ignore:set FastInputIME failed")
def test_typing_restores_the_input_method_it_switched(phones: tuple[Any, list[str]]) -> None:
    """With AdbKeyboard installed uiautomator2 switches the IME to it (here its broadcasts fail on
    the virtual phone and uiautomator2 falls back to setting the focused field's text); the input
    method the phone had is put back either way."""
    host, serials = phones
    vphone = host.phone(serials[1])
    phone = PhoneDevice(serials[1], virtual=True, retry=fast())
    original = vphone.ime_current
    vphone.imes.append("com.github.uiautomator/.AdbKeyboard")
    try:
        phone.start_app(TICKET)
        phone.act(Click(x=500, y=134))
        before = len(vphone.events)
        phone.act(Type(text="上海虹桥"))
        assert any("上海虹桥" in (e.text or "") for e in vphone.events.events(before))
        assert vphone.ime_current == original
    finally:
        vphone.imes.remove("com.github.uiautomator/.AdbKeyboard")
        vphone.ime_current = original
