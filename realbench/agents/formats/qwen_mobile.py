"""Qwen-VL's ``mobile_use`` tool-call format.

The model answers with ``<tool_call>{"name": "mobile_use", "arguments": {"action": "click",
"coordinate": [x, y]}}</tool_call>``, optionally after a line of reasoning. Qwen2.5-VL writes
points in pixels of the resized image it was shown (`CoordSpace.PIXELS`); Qwen3-VL writes them
on a 0–999 grid (`CoordSpace.NORM_999`). Prompts are the upstream cookbooks' text: the tool
wrapped as ``{"type": "function", "function": …}`` in qwen-agent's function-call template, and the
query with a "Task progress" line of earlier steps.

The tool schema travels either inside the system prompt (``tool_mode="prompt"``, the layout
Qwen's own chat template produces, and it works with any server) or in the API's ``tools`` field
(``tool_mode="api"``, Qwen3-VL only, for servers that render tools with the model's chat
template; replies may then come back as structured tool calls, which the agent turns back into
this text form).
"""

from __future__ import annotations

import ast
import json
import re
from enum import StrEnum
from typing import Any

from realbench.actions import (
    Action,
    Answer,
    Click,
    DoubleClick,
    Key,
    KeyPress,
    LongPress,
    OpenApp,
    Swipe,
    Terminate,
    TerminateStatus,
    Type,
    Wait,
    parse_action,
)
from realbench.agents.formats.base import (
    ActionFormat,
    CoordSpace,
    FormatError,
    clean_thought,
    first_json_object,
    from_norm,
    point_from,
    to_norm,
)
from realbench.agents.images import ImagePolicy, ImageSize
from realbench.errors import ConfigError

TOOL_NAME = "mobile_use"
_TOOL_CALL = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
_BUTTONS = {"back": Key.BACK, "home": Key.HOME, "enter": Key.ENTER, "menu": Key.RECENT}
_ADB_KEYS = {
    "back": Key.BACK,
    "keycode_back": Key.BACK,
    "home": Key.HOME,
    "keycode_home": Key.HOME,
    "enter": Key.ENTER,
    "keycode_enter": Key.ENTER,
    "app_switch": Key.RECENT,
    "keycode_app_switch": Key.RECENT,
    "recent": Key.RECENT,
}
# Statuses a model writes in terminate(); upstream's enum is success/failure, and "fail" is common.
_STATUSES = {
    "success": TerminateStatus.SUCCESS,
    "failure": TerminateStatus.FAILURE,
    "fail": TerminateStatus.FAILURE,
}
# Qwen3-VL grounds on this grid whatever the picture's size (its cookbook's "999x999").
QWEN3_GRID = 999
# Qwen3-VL's vision encoder uses 16-px patches merged 2x2: image sides are multiples of 32.
QWEN3_FACTOR = 32
QWEN25_SYSTEM = "You are a helpful assistant."


class ModelFamily(StrEnum):
    QWEN25 = "qwen2.5-vl"
    QWEN3 = "qwen3-vl"


class ToolMode(StrEnum):
    PROMPT = "prompt"
    API = "api"


# The action enum and its description per family, verbatim from the upstream mobile agent
# cookbooks (Qwen2.5-VL: with `key` and `open`; Qwen3-VL: with `answer`).
_ACTIONS: dict[ModelFamily, tuple[str, ...]] = {
    ModelFamily.QWEN25: (
        "key",
        "click",
        "long_press",
        "swipe",
        "type",
        "system_button",
        "open",
        "wait",
        "terminate",
    ),
    ModelFamily.QWEN3: (
        "click",
        "long_press",
        "swipe",
        "type",
        "answer",
        "system_button",
        "wait",
        "terminate",
    ),
}
_ACTION_DOCS = {
    "key": "* `key`: Perform a key event on the mobile device.\n    - This supports adb's `keyevent` syntax.\n"
    '    - Examples: "volume_up", "volume_down", "power", "camera", "clear".',
    "click": "* `click`: Click the point on the screen with coordinate (x, y).",
    "long_press": "* `long_press`: Press the point on the screen with coordinate (x, y) for specified seconds.",
    "swipe": "* `swipe`: Swipe from the starting point with coordinate (x, y) to the end point with "
    "coordinates2 (x2, y2).",
    "type": "* `type`: Input the specified text into the activated input box.",
    "answer": "* `answer`: Output the answer.",
    "system_button": "* `system_button`: Press the system button.",
    "open": "* `open`: Open an app on the device.",
    "wait": "* `wait`: Wait specified seconds for the change to happen.",
    "terminate": "* `terminate`: Terminate the current task and report its completion status.",
}
_TEXT_DOC = {
    ModelFamily.QWEN25: "Required only by `action=key`, `action=type`, and `action=open`.",
    ModelFamily.QWEN3: "Required only by `action=type` and `action=answer`.",
}


def tool_function(family: ModelFamily, screen: ImageSize) -> dict[str, Any]:
    """The ``mobile_use`` function (name, description, parameters) as the upstream cookbook's tool
    reports it; Qwen2.5-VL is told the resized image's size, Qwen3-VL always 999x999."""
    if family is ModelFamily.QWEN3:
        width = height = QWEN3_GRID
    else:
        width, height = screen.width, screen.height
    description = (
        "Use a touchscreen to interact with a mobile device, and take screenshots.\n"
        "* This is an interface to a mobile device with touchscreen. You can perform actions like "
        "clicking, typing, swiping, etc.\n"
        "* Some applications may take time to start or process actions, so you may need to wait and "
        "take successive screenshots to see the results of your actions.\n"
        f"* The screen's resolution is {width}x{height}.\n"
        "* Make sure to click any buttons, links, icons, etc with the cursor tip in the center of the "
        "element. Don't click boxes on their edges unless asked."
    )
    actions = _ACTIONS[family]
    action_doc = "The action to perform. The available actions are:\n" + "\n".join(
        _ACTION_DOCS[a] for a in actions
    )
    return {
        "name": TOOL_NAME,
        "description": description,
        "parameters": {
            "properties": {
                "action": {"description": action_doc, "enum": list(actions), "type": "string"},
                "coordinate": {
                    "description": "(x, y): The x (pixels from the left edge) and y (pixels from the top "
                    "edge) coordinates to move the mouse to. Required only by `action=click`, "
                    "`action=long_press`, and `action=swipe`.",
                    "type": "array",
                },
                "coordinate2": {
                    "description": "(x, y): The x (pixels from the left edge) and y (pixels from the top "
                    "edge) coordinates to move the mouse to. Required only by `action=swipe`.",
                    "type": "array",
                },
                "text": {"description": _TEXT_DOC[family], "type": "string"},
                "time": {
                    "description": "The seconds to wait. Required only by `action=long_press` and "
                    "`action=wait`.",
                    "type": "number",
                },
                "button": {
                    "description": "Back means returning to the previous interface, Home means returning "
                    "to the desktop, Menu means opening the application background menu, and Enter means "
                    "pressing the enter. Required only by `action=system_button`",
                    "enum": ["Back", "Home", "Menu", "Enter"],
                    "type": "string",
                },
                "status": {
                    "description": "The status of the task. Required only by `action=terminate`.",
                    "type": "string",
                    "enum": ["success", "failure"],
                },
            },
            "required": ["action"],
            "type": "object",
        },
    }


def tool_schema(family: ModelFamily, screen: ImageSize) -> dict[str, Any]:
    """The ``mobile_use`` function in OpenAI ``tools`` form."""
    return {"type": "function", "function": tool_function(family, screen)}


# qwen-agent's NousFnCallPrompt text, which the cookbooks' system message is built with.
FN_CALL_TEMPLATE = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{tool_descs}\n"
    "</tools>\n\nFor each function call, return a json object with function name and arguments within "
    '<tool_call></tool_call> XML tags:\n<tool_call>\n{{"name": <function-name>, "arguments": '
    "<args-json-object>}}\n</tool_call>"
)


class QwenMobileFormat(ActionFormat):
    def __init__(
        self, *, family: ModelFamily = ModelFamily.QWEN25, tool_mode: ToolMode = ToolMode.PROMPT
    ) -> None:
        if tool_mode is ToolMode.API and family is ModelFamily.QWEN25:
            # Qwen2.5-VL's processor chat template has no tools section: a server rendering the
            # API's `tools` with it would silently drop the action space.
            raise ConfigError(
                "the tools-in-the-API mode needs Qwen3-VL: Qwen2.5-VL's chat template cannot render tools",
                hint="use --format qwen-mobile (tools in the system prompt) or qwen3-mobile-tools",
            )
        self.family = family
        self.coords = CoordSpace.PIXELS if family is ModelFamily.QWEN25 else CoordSpace.NORM_999
        self.tool_mode = tool_mode
        base = "qwen-mobile" if family is ModelFamily.QWEN25 else "qwen3-mobile"
        self.name = base + ("-tools" if tool_mode is ToolMode.API else "")

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "family": self.family.value, "tool_mode": self.tool_mode.value}

    def image_policy(self) -> ImagePolicy:
        if self.family is ModelFamily.QWEN3:
            # qwen-vl-utils' defaults for a 32-px factor: 4..16384 tokens of 32x32 pixels.
            return ImagePolicy(
                factor=QWEN3_FACTOR,
                min_pixels=4 * QWEN3_FACTOR * QWEN3_FACTOR,
                max_pixels=16384 * QWEN3_FACTOR * QWEN3_FACTOR,
            )
        return ImagePolicy()

    def tools(self, screen: ImageSize) -> list[dict[str, Any]] | None:
        return [tool_schema(self.family, screen)] if self.tool_mode is ToolMode.API else None

    def system_prompt(self, screen: ImageSize) -> str:
        if self.tool_mode is ToolMode.API:
            return QWEN25_SYSTEM
        tool_descs = json.dumps(tool_schema(self.family, screen), ensure_ascii=False)
        return QWEN25_SYSTEM + "\n\n" + FN_CALL_TEMPLATE.format(tool_descs=tool_descs)

    def task_text(self, instruction: str, earlier_steps: list[str]) -> str:
        progress = "".join(f"{step}; " for step in earlier_steps)
        return (
            f"The user query: {instruction}\n"
            f"Task progress (You have done the following operation on the current device): {progress}"
        )

    def history_line(self, action: Action, screen: ImageSize) -> str:
        return json.dumps(
            {"name": TOOL_NAME, "arguments": self.arguments(action, screen)}, ensure_ascii=False
        )

    # --- rendering -------------------------------------------------------------------------

    def arguments(self, action: Action, screen: ImageSize) -> dict[str, Any]:
        def pt(x: int, y: int) -> list[int]:
            return list(from_norm(x, y, screen, self.coords))

        match action:
            case Click(x=x, y=y) | DoubleClick(x=x, y=y):
                return {"action": "click", "coordinate": pt(x, y)}
            case LongPress(x=x, y=y, duration_ms=ms):
                return {"action": "long_press", "coordinate": pt(x, y), "time": ms / 1000}
            case Swipe(x=x, y=y, x2=x2, y2=y2):
                return {"action": "swipe", "coordinate": pt(x, y), "coordinate2": pt(x2, y2)}
            case Type(text=text):
                return {"action": "type", "text": text}
            case Answer(text=text):
                return {"action": "answer", "text": text}
            case KeyPress(key=key) if key is Key.RECENT:
                return {"action": "system_button", "button": "Menu"}
            case KeyPress(key=key):
                return {"action": "system_button", "button": key.value.capitalize()}
            case OpenApp(app=app):
                return {"action": "open", "text": app}
            case Wait(seconds=s):
                return {"action": "wait", "time": s}
            case Terminate(status=status):
                return {"action": "terminate", "status": status.value}
        raise FormatError(f"cannot render {action!r}")  # pragma: no cover - the union is exhaustive

    def render(self, action: Action, screen: ImageSize, thought: str | None = None) -> str:
        call = json.dumps(
            {"name": TOOL_NAME, "arguments": self.arguments(action, screen)}, ensure_ascii=False
        )
        text = f"<tool_call>\n{call}\n</tool_call>"
        return f"{thought}\n{text}" if thought else text

    # --- parsing ---------------------------------------------------------------------------

    def split(self, text: str) -> tuple[str | None, str]:
        m = _TOOL_CALL.search(text)
        if m:
            return clean_thought(text[: m.start()], ("Thought:", "Action:")), m.group(1)
        found = first_json_object(text)
        if found is not None:
            _, start, end = found
            return clean_thought(text[:start], ("Thought:", "Action:")), text[start:end]
        return clean_thought(text), text

    def parse_action_text(self, body: str, screen: ImageSize) -> Action:
        call = _load_object(body)
        name = call.get("name")
        if name is not None and name != TOOL_NAME:
            raise FormatError(f"unknown tool {name!r} (expected {TOOL_NAME!r})", field="name")
        args = call.get("arguments", call if "action" in call else None)
        if isinstance(args, str):
            args = _load_object(args)
        if not isinstance(args, dict):
            raise FormatError("the tool call has no arguments object", field="arguments")
        return self._to_action(args, screen)

    def _point(self, args: dict[str, Any], key: str, screen: ImageSize) -> tuple[int, int]:
        if key not in args:
            raise FormatError(f"action {args.get('action')!r} needs {key!r}", field=key)
        x, y = point_from(args[key])
        return to_norm(x, y, screen, self.coords)

    def _to_action(self, args: dict[str, Any], screen: ImageSize) -> Action:
        kind = str(args.get("action", "")).strip().lower()
        if kind in ("click", "tap", "double_click", "long_press"):
            x, y = self._point(args, "coordinate", screen)
            if kind == "double_click":
                return DoubleClick(x=x, y=y)
            if kind == "long_press":
                seconds = float(args.get("time", 0.8) or 0.8)
                return LongPress(x=x, y=y, duration_ms=min(10_000, max(100, round(seconds * 1000))))
            return Click(x=x, y=y)
        if kind == "swipe":
            x, y = self._point(args, "coordinate", screen)
            x2, y2 = self._point(args, "coordinate2", screen)
            return Swipe(x=x, y=y, x2=x2, y2=y2)
        if kind in ("type", "answer", "open", "open_app"):
            text = args.get("text", args.get("app_name", args.get("app")))
            if not isinstance(text, str) or (kind != "answer" and not text):
                raise FormatError(f"action {kind!r} needs a non-empty 'text'", field="text")
            if kind == "type":
                return Type(text=text)
            if kind == "answer":
                return Answer(text=text)
            return OpenApp(app=text)
        if kind == "system_button":
            button = str(args.get("button", "")).strip().lower()
            if button not in _BUTTONS:
                raise FormatError(
                    f"system button {args.get('button')!r} is not one of Back, Home, Menu, Enter",
                    field="button",
                )
            return KeyPress(key=_BUTTONS[button])
        if kind == "key":
            name = str(args.get("text", "")).strip().lower()
            if name not in _ADB_KEYS:
                raise FormatError(f"key {args.get('text')!r} is not supported", field="text")
            return KeyPress(key=_ADB_KEYS[name])
        if kind == "wait":
            seconds = float(args.get("time", 1.0) or 1.0)
            return Wait(seconds=min(60.0, max(0.1, seconds)))
        if kind == "terminate":
            status = str(args.get("status", "success")).strip().lower()
            if status not in _STATUSES:
                raise FormatError(f"terminate status {status!r} is not success or failure", field="status")
            return Terminate(status=_STATUSES[status])
        if not kind:
            raise FormatError("the tool call names no action", field="action")
        # last resort: a realbench JSON action that happens to sit in the arguments
        try:
            return parse_action({"type": kind, **{k: v for k, v in args.items() if k != "action"}})
        except Exception:
            raise FormatError(f"unknown mobile_use action {kind!r}", field="action") from None


def _load_object(text: str) -> dict[str, Any]:
    text = text.strip()
    if text.startswith("```"):
        text = text.strip("`")
        text = text[4:] if text.startswith("json") else text
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        found = first_json_object(text)
        if found is not None:
            value = found[0]
        else:
            # Models sometimes write Python literals (single quotes, True/False).
            try:
                value = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                raise FormatError("the tool call is not valid JSON", field="arguments") from None
    if not isinstance(value, dict):
        raise FormatError("the tool call is not a JSON object", field="arguments")
    return value
