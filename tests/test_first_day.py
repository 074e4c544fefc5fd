"""A lab's first day: bad set-up is refused before the first episode with one clear line and a
non-zero exit; runs, judges and device listings that produced nothing usable exit non-zero."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from devices.preflight import check_app_versions, check_phones_listed
from devices.rig import parse_rig
from realbench.agents.endpoint_check import check_served
from realbench.agents.fake_server import FAKE_MODEL, FakeModelServer, RequestRules
from realbench.device import Target
from realbench.errors import ConfigError, PreflightError, RunFailedError
from realbench.golden import GoldenAgent
from realbench.runner import LocalRunner, plan_episodes, raise_if_unusable
from realbench.store import RunStore
from realbench.taskpack import parse_pack
from tests.scripted import PACK, ScriptedTarget
from tests.test_judge_failures import _dead_url, _store

ROOT = Path(__file__).resolve().parent.parent
TOY = ROOT / "taskpacks" / "toy"
TICKET = "com.MobileTicket"


def cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "realbench", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        cwd=ROOT,
    )


# --- the model endpoint ------------------------------------------------------------------------


def test_endpoint_check_names_the_served_models_and_refuses_a_wrong_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with FakeModelServer(["x"], rules=RequestRules(model="base", api_key="k-123")) as server:
        monkeypatch.setenv("RB_TEST_KEY", "k-123")
        assert check_served(server.base_url, "base", api_key_env="RB_TEST_KEY") == ["base"]
        with pytest.raises(PreflightError, match=r"--model 'trained' is not served at .*: it serves base"):
            check_served(server.base_url, "trained", api_key_env="RB_TEST_KEY")
        monkeypatch.setenv("RB_TEST_KEY", "wrong")
        with pytest.raises(PreflightError, match="refused the API key"):
            check_served(server.base_url, "base", api_key_env="RB_TEST_KEY")
    monkeypatch.delenv("RB_TEST_KEY")
    with pytest.raises(PreflightError, match="RB_TEST_KEY"):
        check_served("http://127.0.0.1:9/v1", "base", api_key_env="RB_TEST_KEY")


def test_run_refuses_a_wrong_model_name_before_the_first_episode(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    with FakeModelServer(["x"]) as server:
        t0 = time.monotonic()
        done = cli(
            "run", "--pack", str(TOY), "--out", str(out), "--agent", "openai",
            "--base-url", server.base_url, "--model", "trained", "--no-progress",
        )  # fmt: skip
        took = time.monotonic() - t0
        assert not server.requests, "a chat request was sent"
    assert done.returncode == 2, done.stderr
    assert f"--model 'trained' is not served at {server.base_url}: it serves {FAKE_MODEL}" in done.stderr
    assert "Traceback" not in done.stderr and took < 60
    assert not (out / "index.sqlite").exists(), "a run was recorded although nothing could run"


def test_run_refuses_a_dead_endpoint_and_an_unknown_drift(tmp_path: Path) -> None:
    dead = cli(
        "run", "--pack", str(TOY), "--out", str(tmp_path / "a"), "--agent", "openai",
        "--base-url", _dead_url(), "--model", "base", "--no-progress",
    )  # fmt: skip
    assert dead.returncode == 2 and "no model endpoint answers at" in dead.stderr, dead.stderr
    assert "fake_server" in dead.stderr  # the hint says how to start one without a GPU
    drift = cli("run", "--pack", str(TOY), "--out", str(tmp_path / "b"), "--drift", "stormy", "--no-progress")
    assert drift.returncode == 2 and "unknown drift profile 'stormy'" in drift.stderr, drift.stderr
    assert "mild" in drift.stderr  # the hint lists the known ones


def test_serve_model_check_sends_the_key_and_confirms_the_name(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeModelServer(["x"], rules=RequestRules(model="judge-7b", api_key="s3")) as server:
        env = {"RB_SERVE_KEY": "s3"}
        ok = cli(
            "serve-model",
            "--check",
            server.base_url,
            "--name",
            "judge-7b",
            "--api-key-env",
            "RB_SERVE_KEY",
            env=env,
        )
        assert ok.returncode == 0 and "serves judge-7b" in ok.stdout, ok.stderr
        wrong = cli(
            "serve-model",
            "--check",
            server.base_url,
            "--name",
            "base",
            "--api-key-env",
            "RB_SERVE_KEY",
            env=env,
        )
        assert wrong.returncode == 2 and "--name 'base' is not served" in wrong.stderr
        nokey = cli("serve-model", "--check", server.base_url)
        assert nokey.returncode == 2 and "refused the API key" in nokey.stderr


# --- phones ------------------------------------------------------------------------------------


def _usb_rig(
    serial: str, *, adb_port: int = 5037, address: str = "127.0.0.1", **extra: Any
) -> dict[str, Any]:
    return {
        "name": "lab",
        "hosts": [{"name": "bench", "address": address, "adb_port": adb_port}],
        "phones": [{"serial": serial, "profile": "generic-1080x2400", "host": "bench"}],
        **extra,
    }


def test_phones_on_another_host_need_the_ray_scheduler() -> None:
    rig = parse_rig(_usb_rig("8KX7N19A22001234", address="203.0.113.7"))
    with pytest.raises(PreflightError, match=r"plugged into another host.*--scheduler local") as err:
        check_phones_listed(rig, rig.phones, scheduler="local")
    assert "--scheduler ray" in (err.value.hint or "")
    check_phones_listed(rig, rig.phones, scheduler="ray")  # the Ray worker on that host checks it


@pytest.mark.farm
def test_an_unplugged_phone_is_named_within_seconds(adb_server_port: int, tmp_path: Path) -> None:
    rig = parse_rig(_usb_rig("RBUNPLUGGED0001", adb_port=adb_server_port))
    t0 = time.monotonic()
    with pytest.raises(
        PreflightError, match="RBUNPLUGGED0001 is not listed by `adb devices` on this host"
    ) as err:
        check_phones_listed(rig, rig.phones, scheduler="local")
    assert time.monotonic() - t0 < 5
    assert err.value.hint == "check the cable, USB debugging and the RSA prompt on the phone"

    rig_file = tmp_path / "lab.yaml"
    rig_file.write_text(yaml.safe_dump(_usb_rig("RBUNPLUGGED0001", adb_port=adb_server_port)))
    env = {"ANDROID_ADB_SERVER_PORT": str(adb_server_port)}
    run = cli(
        "run", "--pack", str(TOY), "--target", "real", "--rig", str(rig_file), "--out", str(tmp_path / "r"),
        "--no-progress", env=env,
    )  # fmt: skip
    assert run.returncode == 2 and "not listed by `adb devices` on this host" in run.stderr, run.stderr
    assert "RSA prompt" in run.stderr

    devices = cli("devices", "--rig", str(rig_file), "--json", env=env)
    assert devices.returncode == 4, devices.stderr
    (row,) = json.loads(devices.stdout)
    assert row["health"].startswith("unreachable: not listed by `adb devices` on this host")
    assert "1 of 1 phone(s) not ready" in devices.stderr


class _Installed:
    def __init__(self, version: str | None) -> None:
        self.version = version

    def app_version(self, package: str) -> str | None:
        return self.version


def test_app_versions_are_checked_against_every_pin() -> None:
    check_app_versions({"a": _Installed("5.8.0.8")}, TICKET, ["5.8.0.8", None])
    with pytest.raises(PreflightError, match=r"phone b: com.MobileTicket is 5.7.0, the run needs 5.8.0.8"):
        check_app_versions({"a": _Installed("5.8.0.8"), "b": _Installed("5.7.0")}, TICKET, ["5.8.0.8"])
    with pytest.raises(PreflightError, match="com.MobileTicket is not installed"):
        check_app_versions({"a": _Installed(None)}, TICKET, [None])


@pytest.mark.farm
@pytest.mark.slow
def test_real_run_refuses_an_app_at_another_version(tmp_path: Path) -> None:
    """The virtual phones carry 12306 5.8.0.8; a rig pinning another version is refused up front."""
    rig = yaml.safe_load((ROOT / "rigs" / "virtual.yaml").read_text(encoding="utf-8"))
    rig["virtual"] = {**rig["virtual"], "count": 1, "screens": "static"}
    rig["apps"][0]["version"] = "9.9.9"
    rig_file = tmp_path / "old-app.yaml"
    rig_file.write_text(yaml.safe_dump(rig, allow_unicode=True), encoding="utf-8")
    done = cli(
        "run", "--pack", "taskpacks/train_ticketing", "--target", "real", "--rig", str(rig_file),
        "--tasks", "passenger-delete", "--out", str(tmp_path / "r"), "--no-progress", timeout=300,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "com.MobileTicket is 5.8.0.8, the run needs 9.9.9" in done.stderr
    with RunStore(tmp_path / "r", create=False) as store:
        assert store.episodes_frame().empty, "an episode ran on the wrong app version"


def test_only_the_login_recipe_credentials_are_required(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RB_T_USER", "RB_T_PASS", "RB_B_USER", "RB_B_PASS"):
        monkeypatch.delenv(name, raising=False)
    rig = parse_rig(
        {
            **_usb_rig("s1"),
            "phones": [{"serial": "s1", "profile": "generic-1080x2400", "host": "bench", "accounts": ["t", "b"]}],
            "accounts": [
                {"name": "t", "app": TICKET, "username_env": "RB_T_USER", "password_env": "RB_T_PASS"},
                {
                    "name": "b", "app": "com.chinamworld.main", "username_env": "RB_B_USER",
                    "password_env": "RB_B_PASS", "login": [{"into": {"text": "密码"}, "text": "{password}"}],
                },
            ],
        }
    )  # fmt: skip
    assert rig.missing_login_env(TICKET) == []  # no recipe: logged in by hand, nothing to read
    assert rig.missing_login_env("com.chinamworld.main") == ["RB_B_PASS"]  # the recipe types only it


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_quarantine_mark_of_an_ended_run_is_shown_as_history(tmp_path: Path) -> None:
    from devices.farm.pool import LEASE_DIR

    serial = f"RBSTALE{os.getpid()}"
    LEASE_DIR.mkdir(parents=True, exist_ok=True)
    mark = LEASE_DIR / f"{serial}.json"
    mark.write_text(
        json.dumps({"quarantined": True, "quarantine_reason": "3 environment failures in a row",
                    "pid": _dead_pid(), "updated": time.time(), "episodes": 3, "flake_rate": 1.0})
    )  # fmt: skip
    try:
        rig_file = tmp_path / "lab.yaml"
        rig_file.write_text(yaml.safe_dump(_usb_rig(serial)))
        shown = cli("devices", "--rig", str(rig_file), "--no-check")
        assert shown.returncode == 0, shown.stderr
        assert "no (earlier run, pid" in shown.stdout and "3 environment failures in a row" in shown.stdout
        rows = json.loads(cli("devices", "--rig", str(rig_file), "--no-check", "--json").stdout)
        assert rows[0]["quarantined"] is False and rows[0]["quarantine_stale"] is True
    finally:
        mark.unlink()


# --- runs that produced nothing ----------------------------------------------------------------


def test_a_run_where_every_episode_aborted_fails_and_a_rerun_can_retry(tmp_path: Path) -> None:
    pack = parse_pack(PACK)
    store = RunStore(tmp_path / "s", writer="test")
    store.ensure_run("r", pack="scripted", app="scripted", agent="golden", target="clone", config={})
    keys = plan_episodes(pack, task_ids=["submit"], repeats=2)
    dead: list[Target] = [ScriptedTarget("dead", fail_after=0)]
    good: list[Target] = [ScriptedTarget("good")]
    data = LocalRunner(store, "r", pack, dead, GoldenAgent, max_attempts=2, progress=False).run(keys).data
    assert data["episodes"] == 0 and data["given_up"] == 2
    assert data["given_up_reasons"] == {"dead disconnected": 2} or all(
        "dead disconnected" in r for r in data["given_up_reasons"]
    ), data["given_up_reasons"]
    with pytest.raises(RunFailedError, match=r"every episode aborted \(2 given up\)") as err:
        raise_if_unusable(data)
    assert "--retry-given-up" in (err.value.hint or "")

    # a plain rerun leaves them given up; --retry-given-up gives each max_attempts more tries
    LocalRunner(store, "r", pack, good, GoldenAgent, max_attempts=2, progress=False).run(keys)
    assert len(store.episodes_frame(["r"])) == 4
    data = (
        LocalRunner(store, "r", pack, good, GoldenAgent, max_attempts=2, progress=False, retry_given_up=True)
        .run(keys)
        .data
    )
    frame = store.episodes_frame(["r"])
    assert sorted(frame["attempt"].tolist()) == [0, 0, 1, 1, 2, 2]  # attempt 2 of each, on the good phone
    assert set(frame.loc[frame["attempt"] == 2, "device_serial"]) == {"good"}
    assert data["episodes"] == 2 and data["given_up"] == 0
    raise_if_unusable(data)
    store.close()


class _QuarantinedAfterOneFailure(ScriptedTarget):
    """A phone the farm sets aside after its first environment failure (the runner's hook)."""

    failures = 0

    def ready_for_episode(self) -> bool:
        return self.failures == 0

    def after_episode(self, result: Any) -> None:
        self.failures += int(str(result.outcome) == "env_invalid")


def test_a_run_whose_phones_were_all_quarantined_fails(tmp_path: Path) -> None:
    pack = parse_pack(PACK)
    store = RunStore(tmp_path / "s", writer="test")
    store.ensure_run("r", pack="scripted", app="scripted", agent="golden", target="real", config={})
    keys = plan_episodes(pack, task_ids=["submit"], repeats=3)
    phones: list[Target] = [_QuarantinedAfterOneFailure(f"p{i}", fail_after=0) for i in range(2)]
    data = LocalRunner(store, "r", pack, phones, GoldenAgent, progress=False).run(keys).data
    store.close()
    assert data["quarantined_all"] and data["not_run"] == 3  # nothing finished: every phone set aside
    with pytest.raises(RunFailedError, match=r"every phone was quarantined; 3 episode\(s\) were not run"):
        raise_if_unusable(data)


def test_the_documented_run_id_default() -> None:
    from realbench.runner import default_run_id

    assert default_run_id("openai:base", "clone") == "openai-base-clone"
    assert "e.g. openai-base-clone" in " ".join(cli("run", "--help").stdout.split())


# --- judges ------------------------------------------------------------------------------------


def test_judge_prints_a_table_and_fails_when_every_verdict_abstains(tmp_path: Path) -> None:
    store_dir, _ids = _store(tmp_path, n=2)
    abstain = '{"success": null, "reason": "the final screen is cut off", "confidence": 0.1}'
    with FakeModelServer([abstain], repeat_last=True) as server:
        done = cli("judge", str(store_dir), "--judge", f"q={server.base_url},{FAKE_MODEL}", "--no-cache")
    assert done.returncode == 3, done.stdout + done.stderr
    assert "every verdict of judge(s) q was an endpoint failure or an abstention" in done.stderr
    assert "abstained" in done.stdout and "│ q" in done.stdout  # the table, not JSON
    wrong = cli("judge", str(store_dir), "--judge", f"q={server.base_url},{FAKE_MODEL}")
    assert wrong.returncode == 2 and "no model endpoint answers" in wrong.stderr


def test_judge_json(tmp_path: Path) -> None:
    store_dir, _ids = _store(tmp_path, n=1)
    ok = '{"success": true, "reason": "done", "confidence": 0.9}'
    with FakeModelServer([ok], repeat_last=True) as server:
        done = cli("judge", str(store_dir), "--judge", f"q={server.base_url},{FAKE_MODEL}", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["judges"]["q"]["verdicts"] == 1


def _verdicts(rows: list[tuple[str, str, bool]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"key": k, "source": "judge", "name": n, "success": True, "abstained": a, "episode_id": k}
            for k, n, a in rows
        ]
    )


def test_analyses_never_pick_a_judge_that_only_abstains() -> None:
    from analysis.tables import choose_judge

    v = _verdicts(
        [("e1", "a", True), ("e2", "a", True), ("e1", "b", False), ("e1", "c", False), ("e2", "c", False)]
    )
    choice = choose_judge(v, None)
    assert choice.name == "c"
    assert (
        "the most of the judges (also: b (1))" in choice.reason
        and "a left out: only abstentions" in choice.reason
    )
    with pytest.raises(ConfigError, match="judge 'a' only abstained"):
        choose_judge(v, "a")
    assert choose_judge(_verdicts([("e1", "a", True)]), None).name is None


# --- help --------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["run", "judge", "serve-model"])
def test_every_option_has_a_description_and_flags_take_no_value(command: str) -> None:
    import typer.main

    from realbench.cli import app

    click_cmd = typer.main.get_command(app).commands[command]  # type: ignore[attr-defined]
    undocumented = [p.name for p in click_cmd.params if p.param_type_name == "option" and not p.help]
    assert undocumented == []
    shown = cli(command, "--help")
    assert shown.returncode == 0 and "<bool>" not in shown.stdout
    assert "--json" in cli("judge", "--help").stdout


@pytest.mark.farm
def test_a_run_reuses_vphone_up_phones_only_when_they_follow_the_rig(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from devices.farm.rig_targets import mismatch_with_rig, start_virtual_phones
    from devices.virtual import cli as vphone

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # a registry of this test's phones only
    record = vphone.up(1, drift="none", screens="static")
    try:
        (phone,) = record["phones"]
        raw = yaml.safe_load((ROOT / "rigs" / "virtual.yaml").read_text(encoding="utf-8"))
        raw["virtual"] = {**raw["virtual"], "count": 1, "screens": "static"}
        mild = parse_rig(raw)
        assert mismatch_with_rig(phone["control_url"], mild) == "drift 'none', the rig asks for 'mild'"
        with start_virtual_phones(mild) as specs:
            assert [s.serial for s in specs] != [phone["serial"]]  # the rig's own phone, drifted as asked
        raw["virtual"]["drift"] = "none"
        with start_virtual_phones(parse_rig(raw)) as specs:
            assert [s.serial for s in specs] == [phone["serial"]]
    finally:
        vphone.down()


def test_the_device_side_audit_uses_virtual_phone_truth_labelled_as_such(tmp_path: Path) -> None:
    from analysis.analysis_commands import audit_command
    from analysis.tables import StoreSet, audit_table_from_stores
    from realbench.outcome import Verdict, VerdictSource

    store_dir, ids = _store(tmp_path, n=2)  # two scored episodes on env "real"
    with RunStore(store_dir, create=False) as store:
        for i, episode in enumerate(ids):
            store.add_verdict(episode, Verdict(success=i == 0, name="virtual-phone-truth"))
            judge = Verdict(success=True, source=VerdictSource.JUDGE, name="q")
            store.add_verdict(episode, judge)
    with StoreSet([store_dir]) as ss:
        table = audit_table_from_stores(ss)
    assert table["truth"].tolist() == [True, False]
    assert set(table["truth_source"]) == {"virtual-phone-truth"}
    result = audit_command([store_dir], console=None, as_json=True)
    assert any("2 from virtual-phone-truth" in n and "a test rig's truth" in n for n in result.notes)  # type: ignore[union-attr]


@pytest.mark.browser
def test_summary_json_covers_every_run_of_the_store(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    for run_id in ("first", "second"):
        done = cli(
            "run", "--pack", str(TOY), "--out", str(out), "--run-id", run_id, "--no-progress", timeout=300
        )
        assert done.returncode == 0, done.stderr
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["run_id"] == "second"  # the run just made stays at the top level
    assert sorted(summary["runs"]) == ["first", "second"]
    assert summary["runs"]["first"]["episodes"] == summary["runs"]["second"]["episodes"] == 1
    with RunStore(out, create=False) as store:
        assert sorted(store.episodes_frame()["run_id"]) == ["first", "second"]


def test_an_unauthorized_phone_points_to_the_rsa_prompt(monkeypatch: pytest.MonkeyPatch) -> None:
    import devices.preflight as preflight

    rig = parse_rig(_usb_rig("5c4e9a7f"))
    # what the adb server lists before the RSA prompt was accepted
    monkeypatch.setattr(
        preflight, "adb_listing", lambda host: preflight.AdbListing({"5c4e9a7f": "unauthorized"})
    )
    with pytest.raises(PreflightError, match="5c4e9a7f is listed by `adb devices` as 'unauthorized'") as err:
        check_phones_listed(rig, rig.phones, scheduler="local")
    assert "RSA prompt" in (err.value.hint or "")


@pytest.mark.browser
def test_a_rerun_retries_given_up_episodes_only_when_asked(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    dead = cli(
        "run", "--pack", str(TOY), "--out", str(out), "--server-url", _dead_url().removesuffix("/v1"),
        "--max-attempts", "2", "--no-progress", timeout=300,
    )  # fmt: skip
    assert dead.returncode == 3, dead.stdout + dead.stderr
    assert "every episode aborted (1 given up)" in dead.stderr and "is unreachable" in dead.stderr
    assert "1 episode(s) given up" in dead.stdout and "--retry-given-up" in dead.stdout
    again = ("run", "--pack", str(TOY), "--out", str(out), "--max-attempts", "2", "--no-progress")
    plain = cli(*again, timeout=300)
    assert plain.returncode == 3, plain.stderr  # resumed: the given-up episode stays given up
    retried = cli(
        "run", "--pack", str(TOY), "--out", str(out), "--retry-given-up", "--no-progress", timeout=300
    )
    assert retried.returncode == 0, retried.stderr
    with RunStore(out, create=False) as store:
        frame = store.episodes_frame()
    assert frame.sort_values("attempt")["outcome"].tolist() == ["env_invalid", "env_invalid", "success"]
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["successes"] == 1 and summary["given_up"] == 0


def test_a_remote_phone_with_the_local_scheduler_is_refused_by_run(tmp_path: Path) -> None:
    rig_file = tmp_path / "lab.yaml"
    rig_file.write_text(yaml.safe_dump(_usb_rig("8KX7N19A22001234", address="203.0.113.7")))
    done = cli(
        "run", "--pack", str(TOY), "--target", "real", "--rig", str(rig_file), "--out", str(tmp_path / "r")
    )
    assert done.returncode == 2, done.stderr
    assert "plugged into another host; --scheduler local drives only this host's phones" in done.stderr
    assert "--scheduler ray" in done.stderr


@pytest.mark.farm
def test_a_phone_that_vanishes_is_named_as_not_listed(adb_server_port: int) -> None:
    from devices.phone import PhoneDevice, RetryPolicy
    from realbench.errors import DeviceLost

    retry = RetryPolicy(attempts=1, backoff_s=0, reconnect_timeout_s=1)
    with pytest.raises(
        DeviceLost, match="RBGONE01 is not online: not listed by `adb devices` on this host"
    ) as err:
        PhoneDevice("RBGONE01", retry=retry)
    assert "RSA prompt" in (err.value.hint or "")
