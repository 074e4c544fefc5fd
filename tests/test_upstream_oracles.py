"""realbench's prompts and parsers against the upstream packages themselves: qwen-vl-utils'
smart_resize, ui-tars' action parser and prompt template, qwen-agent's function-call prompt.
The same model outputs go through both sides and must come out the same."""

from __future__ import annotations

import ast
import json

import pytest
from qwen_agent.llm.fncall_prompts.nous_fncall_prompt import NousFnCallPrompt
from qwen_agent.llm.schema import ContentItem, Message
from ui_tars.action_parser import parse_action_to_structure_output
from ui_tars.action_parser import smart_resize as ui_tars_smart_resize
from ui_tars.prompt import MOBILE_USE_DOUBAO

from realbench.actions import COORD_MAX, Answer, Click, Key, KeyPress, LongPress, Swipe, Terminate, Type
from realbench.agents.formats import CoordSpace, get_format
from realbench.agents.formats.qwen_mobile import ModelFamily, tool_function
from realbench.agents.images import ImageSize, smart_resize, target_size
from tests.upstream_imports import qwen_vl_utils_smart_resize

qwen_smart_resize = qwen_vl_utils_smart_resize()
SIZES = [
    (1080, 2400),
    (1080, 1920),
    (720, 1600),
    (1440, 3200),
    (393, 852),
    (2560, 1600),
    (100, 90),
    (56, 3000),
]


@pytest.mark.parametrize(("width", "height"), SIZES)
@pytest.mark.parametrize("factor", [28, 32])
def test_smart_resize_equals_qwen_vl_utils(width, height, factor):
    for max_tokens in (1280, 16384, 200):
        max_pixels = max_tokens * factor * factor
        min_pixels = 4 * factor * factor
        ours = smart_resize(height, width, factor=factor, min_pixels=min_pixels, max_pixels=max_pixels)
        theirs = qwen_smart_resize(height, width, factor=factor, min_pixels=min_pixels, max_pixels=max_pixels)
        assert ours == theirs


@pytest.mark.parametrize(("width", "height"), SIZES)
def test_format_image_policies_equal_the_families_processors(width, height):
    # UI-TARS-1.5: ui-tars' own smart_resize with its 100..16384 token budget
    ui = target_size(width, height, get_format("ui-tars").image_policy())
    assert (ui.height, ui.width) == ui_tars_smart_resize(height, width)
    # Qwen3-VL: qwen-vl-utils with a 16-px patch merged 2x2 (32-px steps), default budget
    q3 = target_size(width, height, get_format("qwen3-mobile").image_policy())
    assert (q3.height, q3.width) == qwen_smart_resize(height, width, factor=32)
    assert q3.width % 32 == 0 and q3.height % 32 == 0


# --- UI-TARS ------------------------------------------------------------------------------------

SCREEN = ImageSize(868, 1932)

UI_TARS_OUTPUTS = [
    "Thought: tap search\nAction: click(point='<point>100 200</point>')",
    "Thought: tap search\nAction: click(start_box='(434,966)')",
    "Thought: hold\nAction: long_press(point='<point>867 1931</point>')",
    "Thought: 输入\nAction: type(content='北京\\n')",
    "Thought: type\nAction: type(content='Shanghai')",
    "Thought: move\nAction: drag(start_point='<point>400 1500</point>', end_point='<point>400 300</point>')",
    "Thought: done\nAction: finished(content='¥1,234.50')",
    "Thought: back\nAction: press_back()",
    "Thought: home\nAction: press_home()",
    "Thought: two\nAction: click(point='<point>10 20</point>')\n\nclick(point='<point>30 40</point>')",
]


def _box(value: str) -> tuple[float, float]:
    nums = ast.literal_eval(value)
    return ((nums[0] + nums[2]) / 2, (nums[1] + nums[3]) / 2)


def _near(ours: int, fraction: float) -> bool:
    """The same point within 1.5 units of 1000: realbench's actions sit on an integer 0–1000 grid
    (half a unit of rounding) and map pixel p of an n-px image to p*1000/(n-1) where upstream
    takes p/n (under a unit, at the far edge). On a 2400-px side that is under 4 px."""
    return abs(ours - fraction * COORD_MAX) <= 1.5


# UI-TARS 1.0 writes 0-1000, so outputs with larger numbers are 1.5's only
UI_TARS_CASES = [("ui-tars", t) for t in UI_TARS_OUTPUTS] + [
    ("ui-tars-norm", t) for t in UI_TARS_OUTPUTS if "1931" not in t and "1500" not in t
]


@pytest.mark.parametrize(("name", "text"), UI_TARS_CASES)
def test_ui_tars_parser_equals_upstream(name, text):
    fmt = get_format(name)
    model_type = "qwen25vl" if fmt.coords is CoordSpace.PIXELS else "qwen2vl"
    upstream = parse_action_to_structure_output(
        text, 1000, SCREEN.height, SCREEN.width, model_type=model_type
    )[0]
    parsed = fmt.parse(text, SCREEN)
    assert parsed.error is None, parsed.error
    assert parsed.thought == upstream["thought"]
    kind, inputs, action = upstream["action_type"], upstream["action_inputs"], parsed.action
    if kind in ("click", "long_press"):
        assert isinstance(action, Click if kind == "click" else LongPress)
        fx, fy = _box(inputs["start_box"])
        assert _near(action.x, fx) and _near(action.y, fy), (action, fx, fy)
    elif kind == "drag":
        assert isinstance(action, Swipe)
        (fx, fy), (ex, ey) = _box(inputs["start_box"]), _box(inputs["end_box"])
        assert all(_near(a, b) for a, b in ((action.x, fx), (action.y, fy), (action.x2, ex), (action.y2, ey)))
    elif kind == "type":
        content = inputs["content"]
        assert action == Type(text=content.rstrip("\n"))
        # upstream's rule: a trailing "\n" submits; realbench takes it as Enter right after
        assert parsed.then == ((KeyPress(key=Key.ENTER),) if content.endswith("\n") else ())
    elif kind == "finished":
        assert action == Answer(text=inputs["content"])
    elif kind in ("press_back", "press_home"):
        assert action == KeyPress(key=Key.BACK if kind == "press_back" else Key.HOME)
    else:  # pragma: no cover - every output above is one of these
        pytest.fail(f"unexpected upstream action {kind}")


def test_ui_tars_prompt_is_upstreams_template():
    fmt = get_format("ui-tars")
    text = fmt.task_text("Book a ticket from 北京 to 上海", [])
    assert text == MOBILE_USE_DOUBAO.format(language="English", instruction="Book a ticket from 北京 to 上海")
    assert "press_enter" not in text
    assert fmt.system_prompt(SCREEN) == "You are a helpful assistant."


# --- Qwen mobile_use ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["qwen-mobile", "qwen3-mobile"])
def test_qwen_system_prompt_is_qwen_agents_function_call_prompt(name):
    fmt = get_format(name)
    family = ModelFamily.QWEN3 if name.startswith("qwen3") else ModelFamily.QWEN25
    messages = NousFnCallPrompt().preprocess_fncall_messages(
        messages=[Message(role="system", content=[ContentItem(text="You are a helpful assistant.")])],
        functions=[tool_function(family, SCREEN)],
        lang="en",
    )
    upstream = "".join(item.text for item in messages[0].content)
    assert fmt.system_prompt(SCREEN) == upstream
    assert '{"type": "function", "function": {"name": "mobile_use"' in upstream
    if family is ModelFamily.QWEN3:
        assert "The screen's resolution is 999x999." in upstream
        assert (
            '"enum": ["click", "long_press", "swipe", "type", "answer", "system_button", "wait", "terminate"]'
            in upstream
        )
    else:
        assert f"The screen's resolution is {SCREEN.width}x{SCREEN.height}." in upstream
        assert (
            '"enum": ["key", "click", "long_press", "swipe", "type", "system_button", "open", "wait", "terminate"]'
            in upstream
        )


QWEN_OUTPUTS = [
    '<tool_call>\n{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [434, 966]}}\n</tool_call>',
    'I tap it.\n<tool_call>\n{"name": "mobile_use", "arguments": {"action": "swipe", "coordinate": [400, 900], "coordinate2": [400, 100]}}\n</tool_call>',
    '<tool_call>\n{"name": "mobile_use", "arguments": {"action": "type", "text": "上海"}}\n</tool_call>',
    '<tool_call>\n{"name": "mobile_use", "arguments": {"action": "system_button", "button": "Menu"}}\n</tool_call>',
    '<tool_call>\n{"name": "mobile_use", "arguments": {"action": "terminate", "status": "fail"}}\n</tool_call>',
    '<tool_call>\n{"name": "mobile_use", "arguments": {"action": "answer", "text": "G101"}}\n</tool_call>',
]


@pytest.mark.parametrize("text", QWEN_OUTPUTS)
@pytest.mark.parametrize("name", ["qwen-mobile", "qwen3-mobile"])
def test_qwen_tool_calls_read_as_qwen_agent_reads_them(text, name):
    fmt = get_format(name)
    out = NousFnCallPrompt().postprocess_fncall_messages(
        [Message(role="assistant", content=[ContentItem(text=text)])]
    )
    call = next(m.function_call for m in out if m.function_call)
    args = json.loads(call.arguments)
    assert call.name == "mobile_use"
    action = fmt.parse(text, SCREEN).action
    # the upstream agents' conversion of a point to the screen: Qwen2.5 pixels of the resized
    # image, Qwen3 x/999 of the screen
    grid = (999, 999) if fmt.coords is CoordSpace.NORM_999 else (SCREEN.width, SCREEN.height)
    match args["action"]:
        case "click":
            assert isinstance(action, Click)
            assert _near(action.x, args["coordinate"][0] / grid[0]) and _near(
                action.y, args["coordinate"][1] / grid[1]
            )
        case "swipe":
            assert isinstance(action, Swipe)
            assert _near(action.y2, args["coordinate2"][1] / grid[1])
        case "type":
            assert action == Type(text=args["text"])
        case "system_button":
            assert action == KeyPress(key=Key.RECENT)  # Menu: the application background menu
        case "terminate":
            assert action == Terminate(status="failure")
        case "answer":
            assert action == Answer(text=args["text"])


def test_qwen25_tools_mode_is_refused_with_the_reason():
    from realbench.errors import ConfigError

    with pytest.raises(ConfigError, match="Qwen2.5-VL's chat template"):
        get_format("qwen-mobile-tools")
    assert get_format("qwen3-mobile-tools").tools(SCREEN)[0]["type"] == "function"
