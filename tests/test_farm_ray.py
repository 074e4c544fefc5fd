"""`--scheduler ray` on a two-node Ray cluster on this machine.

The second node has its own adb server and hosts the virtual phones; each phone is a custom
resource of that node. The driver (this process) writes the run store; the episodes must run
on the second node, where the phones are plugged in.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devices.farm.ray_scheduler import VirtualPhonesOnNode, phone_resource, ray_executor
from devices.farm.rig_targets import targets_from_rig
from devices.farm.synthetic import synthetic_pack
from devices.rig import parse_rig
from realbench.golden import GoldenAgent
from realbench.runner import LocalRunner, plan_episodes
from realbench.store import RunStore

pytestmark = [pytest.mark.slow, pytest.mark.farm]

RAY = str(Path(__file__).resolve().parents[1] / ".venv" / "bin" / "ray")
EMULATOR_PORTS = range(5555, 5586)


def free_port() -> int:
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in EMULATOR_PORTS:
            return port


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    # --block keeps `ray start` in the foreground as the leader of its own process group, so the
    # teardown stops exactly the processes this test started.
    return subprocess.Popen(
        [
            RAY,
            "start",
            *args,
            "--block",
            "--disable-usage-stats",
            "--num-cpus=1",
            "--object-store-memory=80000000",
        ],
        env=env,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=8)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


@pytest.fixture
def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    if not os.path.exists(RAY):
        pytest.skip("ray is not installed in .venv")
    import ray

    head_port, adb_port = free_port(), free_port()
    phone_ports = [free_port(), free_port()]
    temp = tempfile.mkdtemp(prefix="rb-ray-", dir="/tmp")
    # A loopback-only test cluster: no token auth (Ray 2.60 turns it on for a new head once
    # ~/.ray/auth_token exists, while its own CLI clients default to off), the same for every
    # process of the cluster, the driver included.
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}
    procs: list[subprocess.Popen[bytes]] = []
    phones: Any = None
    try:
        procs.append(
            _start(
                ["--head", f"--port={head_port}", "--include-dashboard=false", f"--temp-dir={temp}"],
                env,
                tmp_path / "head.log",
            )
        )
        resources = {"node-b": 1, **{phone_resource(f"127.0.0.1:{p}"): 1 for p in phone_ports}}
        node_env = {**env, "ANDROID_ADB_SERVER_PORT": str(adb_port)}
        deadline = time.monotonic() + 60
        while (
            subprocess.run(
                [RAY, "status", f"--address=127.0.0.1:{head_port}"], env=env, capture_output=True
            ).returncode
            != 0
        ):
            assert time.monotonic() < deadline, (tmp_path / "head.log").read_text()[-2000:]
            time.sleep(0.5)
        procs.append(
            _start(
                [f"--address=127.0.0.1:{head_port}", "--resources", json.dumps(resources)],
                node_env,
                tmp_path / "node-b.log",
            )
        )
        ray.init(address=f"127.0.0.1:{head_port}", log_to_driver=False, configure_logging=False)
        while "node-b" not in ray.cluster_resources():
            assert time.monotonic() < deadline + 30, (tmp_path / "node-b.log").read_text()[-2000:]
            time.sleep(0.5)
        host_actor = ray.remote(VirtualPhonesOnNode).options(num_cpus=0, resources={"node-b": 0.5})
        phones = host_actor.remote(2, phone_ports, adb_port)
        serials = ray.get(phones.serials.remote(), timeout=60)
        yield {
            "address": f"127.0.0.1:{head_port}",
            "adb_port": adb_port,
            "serials": serials,
            "phones": phones,
        }
    finally:
        if phones is not None:
            # the cluster may already be failing; its processes are killed below anyway
            with contextlib.suppress(Exception):
                ray.get(phones.close.remote(), timeout=20)
        if ray.is_initialized():
            ray.shutdown()
        for proc in reversed(procs):
            _stop(proc)
        subprocess.run(["adb", "-P", str(adb_port), "kill-server"], capture_output=True, timeout=20)
        shutil.rmtree(temp, ignore_errors=True)


def test_episodes_run_where_the_phones_are(cluster: dict[str, Any], tmp_path: Path) -> None:
    import adbutils
    import ray

    serials = cluster["serials"]
    rig = parse_rig(
        {
            "name": "two-node",
            "hosts": [{"name": "head"}, {"name": "node-b"}],
            "phones": [
                {"serial": s, "profile": "generic-1080x2400", "host": "node-b", "virtual": True}
                for s in serials
            ],
            "apps": [{"package": "com.MobileTicket", "version": "5.8.0.8"}],
        }
    )
    pack = synthetic_pack(tasks=3, steps=1, with_boundary=True)
    store = RunStore(tmp_path / "store")
    store.ensure_run(
        "ray", pack=pack.app, app=pack.app, agent="golden", target="real", config={"scheduler": "ray"}
    )
    keys = plan_episodes(pack, repeats=2)
    with (
        targets_from_rig(rig, pack, "real") as targets,
        ray_executor(pack, rig, "real", GoldenAgent, address=cluster["address"]) as execute,
    ):
        summary = (
            LocalRunner(store, "ray", pack, targets, GoldenAgent, progress=False, execute=execute)
            .run(keys)
            .data
        )
    assert summary["episodes"] == len(keys) and summary["outcomes"] == {"boundary_reached": len(keys)}, (
        summary
    )
    frame = store.episodes_frame(["ray"])
    assert set(frame["device_serial"]) <= set(serials) and set(frame["device_kind"]) == {"virtual-phone"}
    for device_json in frame["device"]:
        worker = json.loads(device_json)["ray_worker"]
        assert worker["adb_port"] == str(cluster["adb_port"])  # ran on node b, beside its adb server
    # the phones are invisible to this host's adb server: only node b could have driven them
    assert not set(serials) & {d.serial for d in adbutils.adb.device_list()}
    inputs = sum(ray.get(cluster["phones"].inputs.remote(s)) for s in serials)
    assert inputs >= 2 * len(keys)  # every episode's taps reached a phone on node b
    store.close()
