"""Fixtures shared by the test modules.

- `other_toy`: registers the test-only second toy clone for a module (the built-in clones, the
  toy shop among them, are always registered); removed again through `clones.base.unregister`.
- `clone_server` / `browser_pool`: one in-process clone server and one headless Chromium per module.
- `session_adb_server` (autouse): a private adb server on a free port for each test process
  (never the default 5037, which a lab's phones or other test runs on this machine may own), with
  $ANDROID_ADB_SERVER_PORT and adbutils' module-level client pointed at it; `adb_server_port`: one
  for a single module.
- `toy_pack`: the toy shop's task pack (taskpacks/toy).
- `rl_pack` / `env_host`: the RL tests' toy pack written to a folder (one per module), and a fresh
  RL environment host per test (closed after it, with the direct DevTools path back on).

Under pytest-xdist (`make test` runs two or more workers with `--dist loadfile`) each module's tests
stay on one worker, so module fixtures (a clone server, a Chromium, an adb server) start once; every
adb server, clone server and Ray cluster of the tests is on free ports, so modules on different
workers never share one.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from realbench.taskpack import TaskPack, load_pack
from tests.adb_support import kill_adb_server, start_adb_server
from tests.other_toy import register_other_toy, unregister_other_toy

REPO = Path(__file__).resolve().parents[1]
TOY_PACK_PATH = REPO / "taskpacks" / "toy"


# Long modules start first, so that under pytest-xdist the last module to finish is a short one
# (`make test` passes --no-loadscope-reorder, which keeps this order). Not xdist's --dist loadgroup:
# with pytest 9 its group marks are silently ignored (it renames a node id attribute pytest no
# longer reads), and every test was scheduled on its own.
LONGEST_TIERS_FIRST = ("slow", "farm", "browser")
# Before the tiers, the modules that take longest (whole module, seconds on a quiet 2-core host:
# the last full run's figures, scaled by the before/after ratio measured for the modules made
# cheaper since), longest first: a long module without a tier mark (the conformance crawl)
# otherwise starts last and keeps one worker busy after the other has finished.
LONGEST_MODULES = (
    "test_study",  # ~120
    "test_certify_farm",  # 111
    "test_farm_faults",  # 73
    "test_conformance",  # ~65
    "test_bank_browser",  # 52
    "test_safe_screens",  # 40
    "test_train_ticketing",  # ~36
    "test_reliability_suite",  # 35
    "test_console_recorder",  # 34
    "test_vphone_ctrl_c",  # 33
    "test_doc_snippets",  # 33
    "test_train_flow_farm",  # 31
    "test_trl_grpo",  # 28
    "test_verifier_contracts",  # ~27
    "test_farm_ray",  # 25
    "test_store_interrupted_runs",  # 23
    "test_resume_sigkill",  # 22
    "test_lab_script",  # 20
)


def _tier_rank(item: pytest.Item) -> int:
    for rank, tier in enumerate(LONGEST_TIERS_FIRST):
        if item.get_closest_marker(tier) is not None:
            return rank
    return len(LONGEST_TIERS_FIRST)


def _module_of(item: pytest.Item) -> str:
    return item.module.__name__ if item.module else item.nodeid


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    module_rank: dict[str, int] = {}
    for item in items:
        module = _module_of(item)
        module_rank[module] = min(module_rank.get(module, len(LONGEST_TIERS_FIRST)), _tier_rank(item))
    for module in module_rank:
        short = module.rsplit(".", 1)[-1]
        if short in LONGEST_MODULES:
            module_rank[module] = LONGEST_MODULES.index(short) - len(LONGEST_MODULES)
    position = {id(item): i for i, item in enumerate(items)}
    items.sort(key=lambda it: (module_rank[_module_of(it)], position[id(it)]))


@pytest.fixture(scope="module")
def other_toy() -> Iterator[None]:
    register_other_toy()
    try:
        yield
    finally:
        unregister_other_toy()


@pytest.fixture(scope="module")
def clone_server() -> Iterator[Any]:
    from clones.server import CloneServer

    with CloneServer() as server:
        yield server


@pytest.fixture(scope="module")
def browser_pool() -> Iterator[Any]:
    from devices.clone_browser import BrowserPool

    with BrowserPool() as pool:
        yield pool


@contextlib.contextmanager
def _private_adb_server() -> Iterator[int]:
    import adbutils

    env = start_adb_server()
    port = int(env["ANDROID_ADB_SERVER_PORT"])
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("ANDROID_ADB_SERVER_PORT", str(port))
            # uiautomator2 uses the module-level client, created at import time with the default port.
            mp.setattr(adbutils, "adb", adbutils.AdbClient(port=port))
            yield port
    finally:
        kill_adb_server(env)


@pytest.fixture(scope="session", autouse=True)
def session_adb_server() -> Iterator[int | None]:
    """Every test process talks to an adb server of its own: whatever a test starts without naming a
    port (a virtual rig's phones, a snippet's `vphone up`, a helper's `adb connect`) lands there and
    is stopped with it, never on the 5037 of a lab's own phones."""
    if shutil.which("adb") is None:
        yield None
        return
    with _private_adb_server() as port:
        yield port


@pytest.fixture(scope="module")
def adb_server_port() -> Iterator[int]:
    """A server for the module alone (phones a module connects stay out of other modules' lists)."""
    with _private_adb_server() as port:
        yield port


@pytest.fixture(scope="session")
def toy_pack() -> TaskPack:
    return load_pack(TOY_PACK_PATH)


@pytest.fixture(scope="module")
def rl_pack(tmp_path_factory: pytest.TempPathFactory) -> str:
    from tests.rl_support import write_pack

    return str(write_pack(tmp_path_factory.mktemp("pack")))


@pytest.fixture
def env_host() -> Iterator[Any]:
    from devices.rl import cdp
    from devices.rl.host import EnvHost

    host = EnvHost().start()
    yield host
    host.close()
    cdp.ENABLED = True
