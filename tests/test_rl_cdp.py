"""The direct DevTools path of RL pages (devices/rl/cdp.py): used where the browser has a port,
observations identical to Playwright's path, page errors and lost pages reported as device errors."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from devices.clone_browser import BrowserPool
from devices.rl import cdp
from devices.rl.config import EnvConfig
from devices.rl.host import EnvHost, ResetRequest, StepRequest
from realbench.errors import DeviceError, DeviceLost
from tests.rl_support import one_env, playwright_path

ACTIONS = [
    '{"type": "click", "x": 500, "y": 180}',
    '{"type": "click", "x": 500, "y": 300}',
    json.dumps({"type": "key", "key": "back"}),
    '{"type": "click", "x": 500, "y": 300}',
]

# --- the connection on its own (a fake websocket: nothing is sent anywhere) ----------------------


class _FakeSocket:
    """Records what is sent; answers nothing by itself (the test dispatches the replies)."""

    def __init__(self) -> None:
        self.sent: list[dict] = []

    async def send(self, text: str) -> None:
        self.sent.append(json.loads(text))


async def _connected() -> tuple[cdp.DevToolsConnection, _FakeSocket]:
    connection = cdp.DevToolsConnection("ws://fake")
    socket = _FakeSocket()
    connection._ws = socket
    return connection, socket


def test_replies_errors_and_a_detached_page_settle_their_commands():
    async def scenario() -> None:
        connection, socket = await _connected()
        page = cdp.PageSession(connection, "S1")
        ok = asyncio.ensure_future(page.send("Runtime.evaluate", {"expression": "1"}))
        bad = asyncio.ensure_future(page.send("Page.bogus"))
        waiting = asyncio.ensure_future(page.send("Page.captureScreenshot"))
        other = asyncio.ensure_future(connection.send("Target.getTargets", {}, "S2"))
        await asyncio.sleep(0)
        assert [m["sessionId"] for m in socket.sent] == ["S1", "S1", "S1", "S2"]
        ids = [m["id"] for m in socket.sent]
        connection._dispatch({"id": ids[0], "result": {"result": {"value": 1}}})
        connection._dispatch(
            {"id": ids[1], "error": {"code": -32601, "message": "'Page.bogus' wasn't found"}}
        )
        connection._dispatch({"method": "Target.detachedFromTarget", "params": {"sessionId": "S1"}})
        assert (await ok) == {"result": {"value": 1}}
        with pytest.raises(cdp.CDPError, match="wasn't found") as raised:  # an error, the page lives
            await bad
        assert not isinstance(raised.value, DeviceLost)
        with pytest.raises(DeviceLost, match="detached"):
            await waiting
        assert not other.done()  # another page's command is not touched
        with pytest.raises(DeviceLost):  # the detached session refuses new commands at once
            await page.send("Runtime.evaluate", {"expression": "1"})
        connection._dispatch({"id": ids[3], "error": {"message": "Session with given id not found."}})
        with pytest.raises(DeviceLost):
            await other
        assert connection._pending == {}

    asyncio.run(scenario())


def test_a_crashed_page_fails_its_commands_and_an_exception_is_a_device_error():
    async def scenario() -> None:
        connection, socket = await _connected()
        page = cdp.PageSession(connection, "S1")
        thrown = asyncio.ensure_future(page.evaluate("() => { throw new Error('boom'); }"))
        await asyncio.sleep(0)
        assert socket.sent[0]["params"]["expression"] == "(() => { throw new Error('boom'); })(null)"
        connection._dispatch(
            {
                "id": socket.sent[0]["id"],
                "result": {
                    "result": {"type": "object"},
                    "exceptionDetails": {
                        "text": "Uncaught",
                        "exception": {"description": "Error: boom\n  at x"},
                    },
                },
            }
        )
        with pytest.raises(cdp.CDPError, match="Error: boom"):
            await thrown
        pending = asyncio.ensure_future(page.send("Page.captureScreenshot"))
        await asyncio.sleep(0)
        connection._dispatch({"method": "Inspector.targetCrashed", "params": {}, "sessionId": "S1"})
        with pytest.raises(DeviceLost, match="crashed"):
            await pending

    asyncio.run(scenario())


def test_a_connection_remembers_only_the_latest_ended_sessions(monkeypatch):
    """A host that opens and closes pages for days keeps a bounded record of ended sessions; a
    forgotten one's commands are refused by Chromium itself ("Session with given id not found")."""
    monkeypatch.setattr(cdp, "GONE_KEPT", 3)

    async def scenario() -> None:
        connection, _ = await _connected()
        for n in range(5):
            connection._dispatch({"method": "Target.detachedFromTarget", "params": {"sessionId": f"S{n}"}})
        assert list(connection._gone) == ["S2", "S3", "S4"]
        with pytest.raises(DeviceLost, match="detached"):
            await cdp.PageSession(connection, "S4").send("Runtime.evaluate", {"expression": "1"})

    asyncio.run(scenario())


@pytest.mark.browser
def test_a_browser_whose_port_file_comes_late_is_waited_for_and_a_missing_one_is_not():
    """Chromium writes the file naming its DevTools port a moment after it starts; a page asking for
    the connection before that must not be left on Playwright's path for the browser's life."""
    args = cdp.devtools_args()
    mark = args[-1]
    with BrowserPool(extra_args=args) as pool:
        [endpoint] = cdp.devtools_endpoints(None, mark)
        [argv] = cdp.devtools_browsers(None, mark).values()
        port_file = cdp.port_file(argv)
        assert port_file is not None
        hidden = port_file.with_name("DevToolsActivePort.later")
        port_file.rename(hidden)  # as it is before Chromium writes it

        async def late() -> tuple[list[str], float]:
            started = time.monotonic()
            asyncio.get_running_loop().call_later(0.3, hidden.rename, port_file)
            return await cdp._marked_endpoints(mark), time.monotonic() - started

        found, waited = asyncio.run(late())
        assert found == [endpoint] and waited >= 0.3
        assert pool.running
    started = time.monotonic()
    assert asyncio.run(cdp._marked_endpoints(cdp.devtools_args()[-1])) == []  # no such browser
    assert time.monotonic() - started < 1


# --- in a host's environments -----------------------------------------------------------------------


def _direct(env_host: EnvHost, env_id: int) -> cdp.PageSession | None:
    device = env_host.env(env_id)._device
    assert device is not None and device._direct is not None and device._direct.done()
    return device._direct.result()


def _episode(env_host: EnvHost, env_id: int) -> list[tuple[bytes, str]]:
    [first] = env_host.reset([ResetRequest(env_id, seed=3)])
    seen = [(first.observation.image, first.observation.hierarchy)]
    for action in ACTIONS:
        [t] = env_host.step([StepRequest(env_id, action)])
        assert not t.info.get("aborted"), t.info
        seen.append((t.observation.image, t.observation.hierarchy))
    return seen


@pytest.mark.browser
def test_pages_use_the_direct_path_and_observe_what_playwrights_path_observes(env_host, rl_pack):
    config = EnvConfig(pack=rl_pack, task_id="buy-item", image="jpeg", screen_cache=False)
    [direct_env] = env_host.create([config])
    direct = _episode(env_host, direct_env)
    session = _direct(env_host, direct_env)
    assert session is not None and session.connection.closed is None
    cdp.use_playwright()  # pages attached from now on keep Playwright's path
    [plain_env] = env_host.create([config])
    plain = _episode(env_host, plain_env)
    assert _direct(env_host, plain_env) is None
    assert len({image for image, _ in direct}) > 2  # the actions changed the screen
    assert direct == plain


@pytest.mark.browser
def test_a_script_error_is_a_device_error_and_the_page_stays_usable(env_host, rl_pack):
    env_id = one_env(env_host, rl_pack)
    device = env_host.env(env_id)._device
    assert device is not None
    with pytest.raises(DeviceError, match="boom"):
        device._run(device._page_eval("() => { throw new Error('boom'); }"), "evaluate")
    assert device._run(device._page_eval("(x) => x.a + 1", {"a": 41}), "evaluate") == 42
    [t] = env_host.step([StepRequest(env_id, ACTIONS[0])])
    assert not t.info.get("aborted")


@pytest.mark.browser
def test_with_the_direct_path_off_a_browser_opens_no_devtools_port(rl_pack):
    with playwright_path(), EnvHost() as env_host:
        env_id = one_env(env_host, rl_pack)
        env = env_host.env(env_id)
        browser = env_host.browser(env.emulation)
        assert browser is not None
        assert not any(a.startswith("--remote-debugging-port") for a in browser.pool.args)
        assert _direct(env_host, env_id) is None
    with EnvHost() as env_host:  # and on again: the port is there
        env_id = one_env(env_host, rl_pack)
        browser = env_host.browser(env_host.env(env_id).emulation)
        assert browser is not None and "--remote-debugging-port=0" in browser.pool.args
        assert _direct(env_host, env_id) is not None
