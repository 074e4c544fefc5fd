"""The uiautomator2 server's side of `tcp:9008`: one HTTP/1.1 exchange per stream, JSON-RPC on /jsonrpc/0.

uiautomator2 3.7.1 opens a fresh `tcp:9008` stream per request (`AdbHTTPConnection`) and reads the
reply by Content-Length. Params arrive as a list (positional), `{}` or null.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import re
import time
from typing import TYPE_CHECKING, Any

from devices.virtual.adb_transport import AdbStream
from devices.virtual.model import InputSource
from realbench.hierarchy import Hierarchy, Node

if TYPE_CHECKING:
    from devices.virtual.phone import VirtualPhone

log = logging.getLogger(__name__)

METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
SERVER_ERROR = -32000
UI_OBJECT_NOT_FOUND = -32002
STEP_MS = 5  # uiautomator throttles each swipe step to about 5 ms


class RpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


async def read_http_request(stream: AdbStream) -> tuple[str, str, dict[str, str], bytes] | None:
    try:
        head = await stream.reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        return None
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) < 2:
        return None
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            key, value = line.split(":", 1)
            headers[key.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0") or 0)
    body = await stream.reader.readexactly(length) if length else b""
    return parts[0].upper(), parts[1], headers, body


def http_response(status: int, body: bytes, content_type: str = "application/json; charset=utf-8") -> bytes:
    reason = {200: "OK", 404: "Not Found", 400: "Bad Request", 500: "Internal Server Error"}.get(status, "OK")
    head = f"HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    return head.encode() + body


class UiautomatorServer:
    """The JSON-RPC methods of the on-device uiautomator2 server, against the phone's UI."""

    def __init__(self, phone: VirtualPhone) -> None:
        self.phone = phone

    async def serve(self, stream: AdbStream) -> None:
        request = await read_http_request(stream)
        if request is None:
            return
        method, path, _headers, body = request
        if method == "GET" and path.startswith("/ping"):
            await stream.write(http_response(200, b"pong", "text/plain"))
        elif method == "POST" and path.startswith("/jsonrpc"):
            await stream.write(http_response(200, await self.handle_jsonrpc(body)))
        elif method == "GET" and path.startswith("/info"):
            await stream.write(http_response(200, json.dumps(await self.deviceInfo()).encode()))
        else:
            await stream.write(http_response(404, b"not found", "text/plain"))

    async def handle_jsonrpc(self, body: bytes) -> bytes:
        req_id: Any = None
        try:
            request = json.loads(body)
            req_id = request.get("id")
            name = request.get("method")
            params = request.get("params")
        except (ValueError, AttributeError):
            return json.dumps(
                {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}}
            ).encode()
        args: list[Any] = list(params) if isinstance(params, list) else []
        handler = getattr(self, f"rpc_{name}", None) if isinstance(name, str) else None
        started = time.perf_counter()
        try:
            if handler is None:
                raise RpcError(METHOD_NOT_FOUND, f"Method not found: {name}")
            result = await handler(*args)
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": req_id, "result": result}
        except RpcError as exc:
            reply = {"jsonrpc": "2.0", "id": req_id, "error": {"code": exc.code, "message": exc.message}}
        except TypeError as exc:
            reply = {
                "jsonrpc": "2.0",
                "id": req_id,
                "error": {"code": INVALID_PARAMS, "message": f"Invalid params: {exc}"},
            }
        except Exception as exc:  # as the Java server does: the exception becomes a JSON-RPC error
            log.warning("jsonrpc %s failed: %s", name, exc)
            message = f"java.lang.RuntimeException: {exc}"
            reply = {"jsonrpc": "2.0", "id": req_id, "error": {"code": SERVER_ERROR, "message": message}}
        log.debug("jsonrpc %s took %.1f ms", name, (time.perf_counter() - started) * 1000)
        return json.dumps(reply, ensure_ascii=False).encode()

    # --- device --------------------------------------------------------------------------------

    async def deviceInfo(self) -> dict[str, Any]:
        ident = self.phone.spec.identity
        package, screen_on = await self.phone.ui_call(
            lambda: (self.phone.ui.foreground, self.phone.ui.screen_on)
        )
        dp_x, dp_y = ident.dp_size
        return {
            "currentPackageName": package,
            "displayHeight": ident.height,
            "displayWidth": ident.width,
            "displayRotation": 0,
            "displaySizeDpX": dp_x,
            "displaySizeDpY": dp_y,
            "productName": ident.product_name,
            "screenOn": screen_on,
            "sdkInt": ident.sdk,
            "naturalOrientation": True,
        }

    async def rpc_deviceInfo(self, *_: Any) -> dict[str, Any]:
        return await self.deviceInfo()

    async def rpc_takeScreenshot(self, scale: float = 1, quality: int = 80, *_: Any) -> str:
        await self.phone.screenshot_delay()
        data = await self.phone.ui_call(self.phone.ui.jpeg, int(quality), float(scale))
        return base64.b64encode(data).decode()

    async def rpc_dumpWindowHierarchy(self, compressed: bool = False, max_depth: int = 50, *_: Any) -> str:
        def dump() -> str:
            taken = time.time()  # when the screen was read: a dump is as old as this
            xml = self.phone.ui.hierarchy()
            self.phone.dump_times.append(taken)
            self.phone.dumps_served += 1
            return xml

        return await self.phone.ui_call(dump)

    async def rpc_wakeUp(self, *_: Any) -> None:
        await self.phone.ui_call(setattr, self.phone.ui, "screen_on", True)

    async def rpc_sleep(self, *_: Any) -> None:
        def sleep() -> None:
            self.phone.ui.screen_on = False
            self.phone.ui.faults.locked = True  # a screen turned off comes back on the keyguard

        await self.phone.ui_call(sleep)

    async def rpc_isScreenOn(self, *_: Any) -> bool:
        return await self.phone.ui_call(lambda: self.phone.ui.screen_on)

    async def rpc_setOrientation(self, *_: Any) -> None:
        return None

    async def rpc_freezeRotation(self, *_: Any) -> None:
        return None

    async def rpc_getLastToast(self, *_: Any) -> None:
        return None

    async def rpc_clearLastToast(self, *_: Any) -> None:
        return None

    async def rpc_makeToast(self, *_: Any) -> bool:
        return True

    async def rpc_getLastTraversedText(self, *_: Any) -> None:
        return None

    async def rpc_clearLastTraversedText(self, *_: Any) -> None:
        return None

    async def rpc_openNotification(self, *_: Any) -> bool:
        return True

    async def rpc_openQuickSettings(self, *_: Any) -> bool:
        return True

    # --- input ---------------------------------------------------------------------------------

    async def rpc_click(self, x: Any, y: Any = None, duration_ms: int | None = None, *_: Any) -> bool:
        if isinstance(x, dict):
            raise RpcError(
                METHOD_NOT_FOUND,
                "click(selector) is not implemented by the virtual phone; click by coordinates",
            )
        ui = self.phone.ui
        await self.phone.input_call(
            ui.tap, int(x), int(y), InputSource.JSONRPC, "click", int(duration_ms) if duration_ms else None
        )
        return True

    async def rpc_longClick(self, x: Any, y: Any = None, *_: Any) -> bool:
        if isinstance(x, dict):
            raise RpcError(METHOD_NOT_FOUND, "longClick(selector) is not implemented by the virtual phone")
        await self.phone.input_call(self.phone.ui.tap, int(x), int(y), InputSource.JSONRPC, "longClick", 500)
        return True

    async def rpc_injectInputEvent(self, action: int, x: float, y: float, meta: int = 0, *_: Any) -> bool:
        await self.phone.input_call(
            self.phone.ui.touch, int(action), int(x), int(y), InputSource.JSONRPC, "injectInputEvent"
        )
        return True

    async def rpc_swipe(self, fx: Any, fy: Any, tx: Any, ty: Any, steps: int = 55, *_: Any) -> bool:
        ui = self.phone.ui
        await self.phone.input_call(
            ui.swipe, int(fx), int(fy), int(tx), int(ty), int(steps) * STEP_MS, InputSource.JSONRPC, "swipe"
        )
        return True

    async def rpc_drag(self, sx: Any, sy: Any, ex: Any, ey: Any, steps: int = 100, *_: Any) -> bool:
        ui = self.phone.ui
        await self.phone.input_call(
            ui.swipe, int(sx), int(sy), int(ex), int(ey), int(steps) * STEP_MS, InputSource.JSONRPC, "drag"
        )
        return True

    async def rpc_swipePoints(self, points: list[int], steps: int = 100, *_: Any) -> bool:
        if len(points) < 4:
            raise RpcError(INVALID_PARAMS, "swipePoints needs at least two points")
        ui = self.phone.ui
        await self.phone.input_call(
            ui.swipe,
            int(points[0]),
            int(points[1]),
            int(points[-2]),
            int(points[-1]),
            int(steps) * STEP_MS,
            InputSource.JSONRPC,
            "swipePoints",
        )
        return True

    async def rpc_pressKey(self, key: str, *_: Any) -> bool:
        await self.phone.input_call(self.phone.ui.key, str(key), InputSource.JSONRPC, "pressKey")
        return True

    async def rpc_pressKeyCode(self, code: int, meta: int = 0, *_: Any) -> bool:
        await self.phone.input_call(self.phone.ui.key, str(code), InputSource.JSONRPC, "pressKeyCode")
        return True

    async def rpc_setClipboard(self, label: Any = None, text: Any = None, *_: Any) -> None:
        await self.phone.ui_call(setattr, self.phone.ui, "clipboard", None if text is None else str(text))

    async def rpc_getClipboard(self, *_: Any) -> str | None:
        return await self.phone.ui_call(lambda: self.phone.ui.clipboard)

    async def rpc_pasteClipboard(self, *_: Any) -> None:
        text = await self.phone.ui_call(lambda: self.phone.ui.clipboard)
        if text:
            await self.phone.input_call(self.phone.ui.text, text, InputSource.JSONRPC, "pasteClipboard")

    async def rpc_clearInputText(self, *_: Any) -> None:
        return None

    # --- selectors (what d(text=...).exists / .info / .wait / .set_text use) -----------------------

    async def _matches(self, selector: dict[str, Any]) -> list[Node]:
        xml = await self.phone.ui_call(self.phone.ui.hierarchy)
        tree = Hierarchy(xml)
        return [n for n in tree.nodes if not n.bounds.empty and _selector_matches(selector, n)]

    async def _one(self, selector: dict[str, Any]) -> Node:
        found = await self._matches(selector)
        index = int(selector.get("instance", 0) or 0)
        if index >= len(found):
            raise RpcError(
                UI_OBJECT_NOT_FOUND, f"androidx.test.uiautomator.UiObjectNotFoundException: {selector}"
            )
        return found[index]

    async def rpc_exist(self, selector: dict[str, Any], *_: Any) -> bool:
        return bool(await self._matches(selector))

    async def rpc_count(self, selector: dict[str, Any], *_: Any) -> int:
        return len(await self._matches(selector))

    async def rpc_waitForExists(self, selector: dict[str, Any], timeout_ms: int = 0, *_: Any) -> bool:
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            if await self._matches(selector):
                return True
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.2)

    async def rpc_waitUntilGone(self, selector: dict[str, Any], timeout_ms: int = 0, *_: Any) -> bool:
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            if not await self._matches(selector):
                return True
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.2)

    async def rpc_objInfo(self, selector: dict[str, Any], *_: Any) -> dict[str, Any]:
        return _obj_info(await self._one(selector))

    async def rpc_objInfoOfAllInstances(self, selector: dict[str, Any], *_: Any) -> list[dict[str, Any]]:
        return [_obj_info(n) for n in await self._matches(selector)]

    async def rpc_getText(self, selector: dict[str, Any], *_: Any) -> str:
        return (await self._one(selector)).text

    async def rpc_setText(self, selector: dict[str, Any], text: str = "", *_: Any) -> bool:
        node = await self._one(selector)
        x, y = node.bounds.center
        ui = self.phone.ui
        await self.phone.input_call(ui.tap, x, y, InputSource.JSONRPC, "setText")
        await self.phone.input_call(ui.text, str(text), InputSource.JSONRPC, "setText")
        return True

    async def rpc_clearTextField(self, selector: dict[str, Any], *_: Any) -> None:
        await self._one(selector)
        return None


SELECTOR_TEXT_FIELDS = {
    "text": lambda n: n.text,
    "description": lambda n: n.content_desc,
    "className": lambda n: n.class_name,
    "packageName": lambda n: n.package,
    "resourceId": lambda n: n.resource_id,
}
SELECTOR_FLAGS = {
    "clickable": "clickable",
    "longClickable": "long_clickable",
    "scrollable": "scrollable",
    "enabled": "enabled",
    "focusable": "focusable",
    "focused": "focused",
    "selected": "selected",
    "checked": "checked",
}


def _selector_matches(selector: dict[str, Any], node: Node) -> bool:
    for key, value in selector.items():
        if key in ("mask", "childOrSibling", "childOrSiblingSelector", "instance", "index"):
            continue
        if key in SELECTOR_TEXT_FIELDS:
            if SELECTOR_TEXT_FIELDS[key](node) != value:
                return False
        elif key in SELECTOR_FLAGS:
            if getattr(node, SELECTOR_FLAGS[key]) != bool(value):
                return False
        elif key == "textContains":
            if str(value) not in node.text:
                return False
        elif key == "textStartsWith":
            if not node.text.startswith(str(value)):
                return False
        elif key == "descriptionContains":
            if str(value) not in node.content_desc:
                return False
        elif key.endswith("Matches"):
            field = {
                "textMatches": node.text,
                "descriptionMatches": node.content_desc,
                "classNameMatches": node.class_name,
                "packageNameMatches": node.package,
                "resourceIdMatches": node.resource_id,
            }.get(key)
            if field is None or re.fullmatch(str(value), field) is None:
                return False
    return True


def _obj_info(node: Node) -> dict[str, Any]:
    bounds = {
        "left": node.bounds.left,
        "top": node.bounds.top,
        "right": node.bounds.right,
        "bottom": node.bounds.bottom,
    }
    return {
        "bounds": bounds,
        "visibleBounds": dict(bounds),
        "childCount": len(node.children),
        "className": node.class_name,
        "contentDescription": node.content_desc or None,
        "packageName": node.package,
        "resourceName": node.resource_id or None,
        "text": node.text,
        "checkable": False,
        "checked": node.checked,
        "clickable": node.clickable,
        "enabled": node.enabled,
        "focusable": node.focusable,
        "focused": node.focused,
        "longClickable": node.long_clickable,
        "scrollable": node.scrollable,
        "selected": node.selected,
    }
