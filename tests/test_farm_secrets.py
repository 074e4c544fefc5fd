"""Rig secrets are used (the farm logs a phone in with them) but never written anywhere.

The run is a real `realbench -v run --target real` subprocess with debug logging; afterwards
every byte it wrote — the run store (SQLite, WAL, trajectories, screenshots), summary.json and
its stdout/stderr — is searched for the secret values set in its environment.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from devices.farm.synthetic import write_synthetic_pack
from devices.virtual import VirtualPhoneHost
from devices.virtual.phone import static_screens
from tests.farm_support import TICKET, LoginScreen

pytestmark = pytest.mark.farm

ROOT = Path(__file__).resolve().parents[1]
USER = "zhang.wei.7731"
PASSWORD = "Pa55-very-secret-9137"


def test_secrets_never_leave_the_environment(tmp_path: Path) -> None:
    screens: list[LoginScreen] = []

    def maker(phone: Any, package: str) -> Any:
        if package != TICKET:
            return static_screens(phone, package)
        screens.append(LoginScreen(package, USER, PASSWORD))
        return screens[-1]

    pack = write_synthetic_pack(tmp_path / "pack", tasks=2, steps=1, with_boundary=True, login=True)
    out = tmp_path / "store"
    with VirtualPhoneHost() as host:
        (info,) = host.start(1, screens="static", drift="none")
        host.phone(info.serial)._screens = maker
        host.adb_connect()
        rig = tmp_path / "rig.yaml"
        rig.write_text(
            yaml.safe_dump(
                {
                    "name": "secrets-test",
                    "phones": [
                        {
                            "serial": info.serial,
                            "profile": "generic-1080x2400",
                            "virtual": True,
                            "accounts": ["ticket"],
                        }
                    ],
                    "apps": [
                        {
                            "package": TICKET,
                            "version": "5.8.0.8",
                            "login_screen": {"resource_id": "login_button"},
                        }
                    ],
                    "accounts": [
                        {
                            "name": "ticket",
                            "app": TICKET,
                            "username_env": "RB_TEST_TICKET_USER",
                            "password_env": "RB_TEST_TICKET_PASSWORD",
                            "login": [
                                {"into": {"resource_id": "username"}, "text": "{username}"},
                                {"into": {"resource_id": "password"}, "text": "{password}"},
                                {"tap": {"resource_id": "login_button"}},
                            ],
                        }
                    ],
                },
                allow_unicode=True,
            ),
            encoding="utf-8",
        )
        env = {
            **os.environ,
            "RB_TEST_TICKET_USER": USER,
            "RB_TEST_TICKET_PASSWORD": PASSWORD,
            "PYTHONPATH": str(ROOT),
        }
        cmd = [
            sys.executable,
            "-m",
            "realbench",
            "-v",
            "run",
            "--pack",
            str(pack),
            "--out",
            str(out),
            "--target",
            "real",
            "--rig",
            str(rig),
            "--agent",
            "golden",
            "--repeats",
            "2",
            "--no-progress",
        ]
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, timeout=240)
        typed = [e.text for e in host.phone(info.serial).events.events() if e.text]
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")[-3000:]
    # the secret was really used: the farm typed it into the phone and the login succeeded
    assert PASSWORD in typed and USER in typed
    assert screens and screens[-1].logged_in and screens[-1].attempts == 1
    assert b"DEBUG" in proc.stderr, "debug logging was not on: the test would prove little"
    needles = [PASSWORD.encode(), base64.b64encode(PASSWORD.encode()), PASSWORD.encode("utf-16-le")]
    written = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.suffix == ".jsonl" or p.name.startswith("index.sqlite") for p in written)
    for path in written:
        data = path.read_bytes()
        for needle in needles:
            assert needle not in data, f"the password leaked into {path}"
    for stream in (proc.stdout, proc.stderr):
        for needle in needles:
            assert needle not in stream
