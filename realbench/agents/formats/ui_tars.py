"""UI-TARS text actions: ``Thought: … Action: click(point='<point>x y</point>')``.

The prompt is UI-TARS's own mobile template (ui-tars' ``MOBILE_USE_DOUBAO``), verbatim, as the
first user turn; the system message is "You are a helpful assistant."; earlier steps come back as
the model's own assistant turns (`PromptLayout.TURNS`).

UI-TARS-1.5 writes points in pixels of the resized image it was shown (`CoordSpace.PIXELS`);
UI-TARS 1.0 writes them on a 0–1000 grid (`CoordSpace.NORM_1000`). Points may appear as
``'<point>x y</point>'``, ``'(x,y)'``, ``'<|box_start|>(x,y)<|box_end|>'`` or a box
``'(x1,y1,x2,y2)'`` (its centre is used). ``type(content='…\\n')`` (a trailing newline) submits:
it is Type, then Enter as a follow-up action (`ParsedOutput.then`).

``scroll(direction=…)`` names where the content should move into view, as in AndroidWorld:
``direction='down'`` reveals what is below, so the finger swipes up.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from realbench.actions import (
    COORD_MAX,
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
)
from realbench.agents.formats.base import (
    ActionFormat,
    CoordSpace,
    FormatError,
    PromptLayout,
    from_norm,
    point_from,
    to_norm,
)
from realbench.agents.images import ImagePolicy, ImageSize

# How far (in 0–1000 units) a direction-only scroll moves the finger.
SCROLL_DISTANCE = 400
_CALL = re.compile(r"^\s*([A-Za-z_]\w*)\s*\((.*)\)\s*$", re.DOTALL)
_KWARG = re.compile(r"(\w+)\s*=\s*(['\"])(.*?)\2\s*(?=,\s*\w+\s*=|$)", re.DOTALL)
_HOTKEYS = {"back": Key.BACK, "home": Key.HOME, "enter": Key.ENTER, "return": Key.ENTER}

# UI-TARS's mobile template (ui-tars's `MOBILE_USE_DOUBAO`), verbatim: the whole of it, the
# instruction included, is the first user turn. Submitting is a trailing "\n" in `content`.
MOBILE_USE_TEMPLATE = (
    "You are a GUI agent. You are given a task and your action history, with screenshots. You need "
    "to perform the next action to complete the task. \n## Output Format\n```\nThought: ...\nAction: "
    "...\n```\n## Action Space\n\nclick(point='<point>x1 y1</point>')\nlong_press(point='<point>x1 "
    "y1</point>')\ntype(content='') #If you want to submit your input, use \"\\n\" at the end of "
    "`content`.\nscroll(point='<point>x1 y1</point>', direction='down or up or right or left')\n"
    "open_app(app_name='')\ndrag(start_point='<point>x1 y1</point>', end_point='<point>x2 y2</point>')"
    "\npress_home()\npress_back()\nfinished(content='xxx') # Use escape characters \\', \\\", and "
    "\\n in content part to ensure we can parse the content in normal python string format.\n\n\n"
    "## Note\n- Use {language} in `Thought` part.\n- Write a small plan and finally summarize your next "
    "action (with its target element) in one sentence in `Thought` part.\n\n## User Instruction\n"
    "{instruction}\n"
)
SYSTEM_MESSAGE = "You are a helpful assistant."
# UI-TARS-1.5's processor limits (ui-tars's action_parser MIN_PIXELS / MAX_PIXELS).
UI_TARS_MIN_PIXELS = 100 * 28 * 28
UI_TARS_MAX_PIXELS = 16384 * 28 * 28
# How many screenshots UI-TARS's reference agents keep (the current one included).
UI_TARS_HISTORY_IMAGES = 5


class UITarsFormat(ActionFormat):
    layout = PromptLayout.TURNS

    def __init__(self, *, coords: CoordSpace = CoordSpace.PIXELS, language: str = "English") -> None:
        self.coords = coords
        self.language = language
        self.name = "ui-tars" if coords is CoordSpace.PIXELS else "ui-tars-norm"

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "language": self.language}

    def image_policy(self) -> ImagePolicy:
        return ImagePolicy(min_pixels=UI_TARS_MIN_PIXELS, max_pixels=UI_TARS_MAX_PIXELS)

    def default_image_window(self) -> int:
        return UI_TARS_HISTORY_IMAGES

    def system_prompt(self, screen: ImageSize) -> str:
        return SYSTEM_MESSAGE

    def task_text(self, instruction: str, earlier_steps: list[str]) -> str:
        # Earlier steps travel as assistant turns in this layout, never inside the template.
        return MOBILE_USE_TEMPLATE.replace("{language}", self.language).replace("{instruction}", instruction)

    # --- rendering -------------------------------------------------------------------------

    def _box(self, x: int, y: int, screen: ImageSize) -> str:
        px, py = from_norm(x, y, screen, self.coords)
        return f"'<point>{px} {py}</point>'"

    def action_text(self, action: Action, screen: ImageSize) -> str:
        match action:
            case Click(x=x, y=y):
                return f"click(point={self._box(x, y, screen)})"
            case DoubleClick(x=x, y=y):
                return f"left_double(point={self._box(x, y, screen)})"
            case LongPress(x=x, y=y):
                return f"long_press(point={self._box(x, y, screen)})"
            case Swipe(x=x, y=y, x2=x2, y2=y2):
                return f"drag(start_point={self._box(x, y, screen)}, end_point={self._box(x2, y2, screen)})"
            case Type(text=text):
                return f"type(content={_quote(text)})"
            case KeyPress(key=Key.BACK):
                return "press_back()"
            case KeyPress(key=Key.HOME):
                return "press_home()"
            case KeyPress(key=Key.ENTER):
                return "press_enter()"  # not in the prompt; only a history of other agents has it
            case KeyPress(key=key):
                return f"hotkey(key={_quote(key.value)})"
            case OpenApp(app=app):
                return f"open_app(app_name={_quote(app)})"
            case Wait():
                return "wait()"
            case Answer(text=text):
                return f"finished(content={_quote(text)})"
            case Terminate(status=TerminateStatus.FAILURE):
                return "call_user()"
            case Terminate():
                return "finished(content='')"
        raise FormatError(f"cannot render {action!r}")  # pragma: no cover - the union is exhaustive

    def render(self, action: Action, screen: ImageSize, thought: str | None = None) -> str:
        return f"Thought: {thought or ''}\nAction: {self.action_text(action, screen)}"

    def history_line(self, action: Action, screen: ImageSize) -> str:
        return self.action_text(action, screen)

    # --- parsing ---------------------------------------------------------------------------

    def split(self, text: str) -> tuple[str | None, str]:
        idx = text.rfind("Action:")
        if idx == -1:
            return _thought_of(text), text.strip()
        return _thought_of(text[:idx]), text[idx + len("Action:") :].strip()

    def parse_action_text(self, body: str, screen: ImageSize) -> Action:
        # several actions may follow one Action: label (upstream splits at ")\n\n"); the first is
        # the one to take now
        name, args = self._call(body)
        return self._to_action(name, args, screen)

    def _call(self, body: str) -> tuple[str, dict[str, str]]:
        first = body.strip().strip("`").strip()
        first = re.split(r"\)\s*\n\s*\n", first, maxsplit=1)[0].strip()
        if not first.endswith(")"):
            first += ")"
        m = _CALL.match(first)
        if not m:
            raise FormatError(f"no action call in {first[:80]!r}", field="action")
        return m.group(1).lower(), _kwargs(m.group(2))

    def parse_followups(self, body: str, screen: ImageSize) -> tuple[Action, ...]:
        name, args = self._call(body)
        if name == "type" and args.get("content", "").endswith("\n") and args["content"].strip():
            return (KeyPress(key=Key.ENTER),)
        return ()

    def _pt(self, args: dict[str, str], *keys: str, screen: ImageSize) -> tuple[int, int]:
        for key in keys:
            if key in args:
                x, y = point_from(args[key])
                return to_norm(x, y, screen, self.coords)
        raise FormatError(f"missing {keys[0]!r}", field=keys[0])

    def _to_action(self, name: str, args: dict[str, str], screen: ImageSize) -> Action:
        start = ("start_box", "point", "start_point")
        end = ("end_box", "end_point")
        if name in ("click", "left_single", "tap"):
            x, y = self._pt(args, *start, screen=screen)
            return Click(x=x, y=y)
        if name in ("left_double", "double_click"):
            x, y = self._pt(args, *start, screen=screen)
            return DoubleClick(x=x, y=y)
        if name == "long_press":
            x, y = self._pt(args, *start, screen=screen)
            seconds = _float(args.get("time"), 0.8)
            return LongPress(x=x, y=y, duration_ms=min(10_000, max(100, round(seconds * 1000))))
        if name in ("drag", "swipe", "select") or (name == "scroll" and any(k in args for k in end)):
            x, y = self._pt(args, *start, screen=screen)
            x2, y2 = self._pt(args, *end, screen=screen)
            return Swipe(x=x, y=y, x2=x2, y2=y2)
        if name == "scroll":
            direction = args.get("direction", "").strip().lower()
            if direction not in ("up", "down", "left", "right"):
                raise FormatError(
                    f"scroll direction {direction!r} is not up/down/left/right", field="direction"
                )
            if any(k in args for k in start):
                x, y = self._pt(args, *start, screen=screen)
            else:
                x, y = COORD_MAX // 2, COORD_MAX // 2
            dx, dy = {"down": (0, -1), "up": (0, 1), "right": (-1, 0), "left": (1, 0)}[direction]
            x2 = min(COORD_MAX, max(0, x + dx * SCROLL_DISTANCE))
            y2 = min(COORD_MAX, max(0, y + dy * SCROLL_DISTANCE))
            return Swipe(x=x, y=y, x2=x2, y2=y2)
        if name == "type":
            content = args.get("content", "")
            # A trailing newline means "and submit" (the Enter is `parse_followups`'s).
            content = content.rstrip("\n")
            if not content:
                raise FormatError("type() needs non-empty content", field="content")
            return Type(text=content)
        if name in ("press_back", "back"):
            return KeyPress(key=Key.BACK)
        if name in ("press_home", "home"):
            return KeyPress(key=Key.HOME)
        if name in ("press_enter", "enter"):
            return KeyPress(key=Key.ENTER)
        if name == "hotkey":
            key = args.get("key", "").strip().lower()
            if key not in _HOTKEYS:
                raise FormatError(f"hotkey {key!r} is not supported (back, home, enter)", field="key")
            return KeyPress(key=_HOTKEYS[key])
        if name == "open_app":
            app = args.get("app_name", args.get("app", "")).strip()
            if not app:
                raise FormatError("open_app() needs app_name", field="app_name")
            return OpenApp(app=app)
        if name == "wait":
            return Wait()
        if name in ("finished", "answer"):
            content = args.get("content", "").strip()
            return Answer(text=content) if content else Terminate(status=TerminateStatus.SUCCESS)
        if name == "call_user":
            return Terminate(status=TerminateStatus.FAILURE)
        raise FormatError(f"unknown UI-TARS action {name!r}", field="action")


def _thought_of(text: str) -> str | None:
    t = text.strip()
    for label in ("Thought:", "Reflection:", "Action_Summary:"):
        t = t.replace(label, "")
    return t.strip() or None


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"


def _float(value: str | None, default: float) -> float:
    try:
        return float(value) if value not in (None, "") else default
    except ValueError:
        return default


def _kwargs(arg_text: str) -> dict[str, str]:
    """Keyword arguments of a call, as strings. Python syntax first, then a lenient scan for
    the unescaped quotes models often write inside content."""
    if not arg_text.strip():
        return {}
    try:
        call = ast.parse(f"f({arg_text})", mode="eval").body
        if isinstance(call, ast.Call) and not call.args:
            out: dict[str, str] = {}
            for kw in call.keywords:
                if kw.arg is None:
                    raise ValueError
                value = ast.literal_eval(kw.value)
                out[kw.arg] = value if isinstance(value, str) else str(value)
            return out
    except (SyntaxError, ValueError):
        pass
    found = {m.group(1): m.group(3) for m in _KWARG.finditer(arg_text.strip())}
    if not found:
        raise FormatError(f"cannot read the arguments {arg_text[:80]!r}", field="arguments")
    return {k: v.replace("\\n", "\n").replace("\\'", "'").replace('\\"', '"') for k, v in found.items()}
