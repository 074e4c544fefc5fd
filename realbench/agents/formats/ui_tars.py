"""UI-TARS text actions: ``Thought: … Action: click(start_box='(x,y)')``.

UI-TARS-1.5 writes points in pixels of the resized image it was shown (`CoordSpace.PIXELS`);
UI-TARS 1.0 writes them on a 0–1000 grid (`CoordSpace.NORM_1000`). Points may appear as
``'(x,y)'``, ``'<|box_start|>(x,y)<|box_end|>'``, ``'<point>x y</point>'`` or a box
``'(x1,y1,x2,y2)'`` (its centre is used).

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
    from_norm,
    point_from,
    to_norm,
)
from realbench.agents.images import ImageSize

# How far (in 0–1000 units) a direction-only scroll moves the finger.
SCROLL_DISTANCE = 400
_CALL = re.compile(r"^\s*([A-Za-z_]\w*)\s*\((.*)\)\s*$", re.DOTALL)
_KWARG = re.compile(r"(\w+)\s*=\s*(['\"])(.*?)\2\s*(?=,\s*\w+\s*=|$)", re.DOTALL)
_HOTKEYS = {"back": Key.BACK, "home": Key.HOME, "enter": Key.ENTER, "return": Key.ENTER}

ACTION_SPACE = """click(start_box='<|box_start|>(x1,y1)<|box_end|>')
long_press(start_box='<|box_start|>(x1,y1)<|box_end|>')
type(content='') #If you want to submit your input, next action use press_enter().
scroll(start_box='<|box_start|>(x1,y1)<|box_end|>', direction='down or up or right or left')
drag(start_box='<|box_start|>(x1,y1)<|box_end|>', end_box='<|box_start|>(x2,y2)<|box_end|>')
open_app(app_name='')
press_home()
press_back()
press_enter()
wait() #Sleep for 1s and take a screenshot to check for any changes.
finished(content='xxx') # Use escape characters \\', \\", and \\n in content part to ensure we can parse the content in normal python string format. Put the answer to a question in content."""


class UITarsFormat(ActionFormat):
    def __init__(self, *, coords: CoordSpace = CoordSpace.PIXELS, language: str = "English") -> None:
        self.coords = coords
        self.language = language
        self.name = "ui-tars" if coords is CoordSpace.PIXELS else "ui-tars-norm"

    def settings(self) -> dict[str, Any]:
        return {**super().settings(), "language": self.language}

    def system_prompt(self, screen: ImageSize) -> str:
        if self.coords is CoordSpace.PIXELS:
            grid = f"Coordinates are pixels of the {screen.width}x{screen.height} screenshot."
        else:
            grid = "Coordinates are relative, 0-1000 on both axes."
        return (
            "You are a GUI agent. You are given a task and your action history, with screenshots. "
            "You need to perform the next action to complete the task.\n\n"
            "## Output Format\n```\nThought: ...\nAction: ...\n```\n\n"
            f"## Action Space\n{ACTION_SPACE}\n\n"
            f"## Note\n- Use {self.language} in `Thought` part.\n"
            "- Write a small plan and finally summarize your next action (with its target element) in "
            f"one sentence in `Thought` part.\n- {grid}"
        )

    def task_text(self, instruction: str, earlier_steps: list[str]) -> str:
        text = f"## User Instruction\n{instruction}"
        if earlier_steps:
            text += "\n\n## Earlier steps (screenshots omitted)\n" + "\n".join(earlier_steps)
        return text

    # --- rendering -------------------------------------------------------------------------

    def _box(self, x: int, y: int, screen: ImageSize) -> str:
        px, py = from_norm(x, y, screen, self.coords)
        return f"'<|box_start|>({px},{py})<|box_end|>'"

    def action_text(self, action: Action, screen: ImageSize) -> str:
        match action:
            case Click(x=x, y=y):
                return f"click(start_box={self._box(x, y, screen)})"
            case DoubleClick(x=x, y=y):
                return f"left_double(start_box={self._box(x, y, screen)})"
            case LongPress(x=x, y=y):
                return f"long_press(start_box={self._box(x, y, screen)})"
            case Swipe(x=x, y=y, x2=x2, y2=y2):
                return f"drag(start_box={self._box(x, y, screen)}, end_box={self._box(x2, y2, screen)})"
            case Type(text=text):
                return f"type(content={_quote(text)})"
            case KeyPress(key=Key.BACK):
                return "press_back()"
            case KeyPress(key=Key.HOME):
                return "press_home()"
            case KeyPress(key=Key.ENTER):
                return "press_enter()"
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
        # several actions may follow one Action: label; the first is the one to take now
        first = body.strip().strip("`").strip()
        first = re.split(r"\n\s*\n", first, maxsplit=1)[0].strip()
        m = _CALL.match(first)
        if not m:
            raise FormatError(f"no action call in {first[:80]!r}", field="action")
        name, arg_text = m.group(1).lower(), m.group(2)
        args = _kwargs(arg_text)
        return self._to_action(name, args, screen)

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
            # A trailing newline means "and submit" in UI-TARS; realbench submits with a separate key.
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
