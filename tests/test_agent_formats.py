"""Parsers of the three prompt/action formats on realistic (and broken) model outputs."""

from __future__ import annotations

import pytest

from realbench.actions import (
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
    action_to_dict,
)
from realbench.agents.formats import CoordSpace, format_names, get_format
from realbench.agents.images import ImageSize
from realbench.errors import UnknownNameError

# A 1001×2001 resized image makes pixel → normalised exact: x stays x, y halves.
SCREEN = ImageSize(1001, 2001)
ERR = None


def tc(name: str, args: str) -> str:
    return f'<tool_call>\n{{"name": "{name}", "arguments": {args}}}\n</tool_call>'


QWEN_CASES = [
    (
        "Thought: The search button is at the top.\n"
        + tc("mobile_use", '{"action": "click", "coordinate": [100, 200]}'),
        {"type": "click", "x": 100, "y": 100},
        "search button",
    ),
    (
        tc("mobile_use", '{"action": "click", "coordinate": [540, 1200]}'),
        {"type": "click", "x": 540, "y": 600},
        None,
    ),
    (
        '<tool_call>\n{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [10, 20]}}',
        {"type": "click", "x": 10, "y": 10},
        None,
    ),
    (
        tc("mobile_use", '{"action": "long_press", "coordinate": [300, 400], "time": 2}'),
        {"type": "long_press", "x": 300, "y": 200, "duration_ms": 2000},
        None,
    ),
    (
        tc("mobile_use", '{"action": "swipe", "coordinate": [500, 1500], "coordinate2": [500, 500]}'),
        {"type": "swipe", "x": 500, "y": 750, "x2": 500, "y2": 250, "duration_ms": 300},
        None,
    ),
    (
        "I need to enter the station.\n" + tc("mobile_use", '{"action": "type", "text": "北京南"}'),
        {"type": "type", "text": "北京南"},
        "enter the station",
    ),
    (tc("mobile_use", '{"action": "answer", "text": "¥553.5"}'), {"type": "answer", "text": "¥553.5"}, None),
    (tc("mobile_use", '{"action": "system_button", "button": "Back"}'), {"type": "key", "key": "back"}, None),
    (tc("mobile_use", '{"action": "system_button", "button": "Home"}'), {"type": "key", "key": "home"}, None),
    (
        tc("mobile_use", '{"action": "system_button", "button": "Enter"}'),
        {"type": "key", "key": "enter"},
        None,
    ),
    (
        tc("mobile_use", '{"action": "system_button", "button": "Menu"}'),
        {"type": "key", "key": "recent"},
        None,
    ),
    (tc("mobile_use", '{"action": "key", "text": "KEYCODE_BACK"}'), {"type": "key", "key": "back"}, None),
    (tc("mobile_use", '{"action": "wait", "time": 2}'), {"type": "wait", "seconds": 2.0}, None),
    (
        tc("mobile_use", '{"action": "terminate", "status": "success"}'),
        {"type": "terminate", "status": "success"},
        None,
    ),
    (
        tc("mobile_use", '{"action": "terminate", "status": "failure"}'),
        {"type": "terminate", "status": "failure"},
        None,
    ),
    (
        tc("mobile_use", '{"action": "open", "text": "铁路12306"}'),
        {"type": "open_app", "app": "铁路12306"},
        None,
    ),
    (
        tc("mobile_use", '{"action": "open_app", "app_name": "com.MobileTicket"}'),
        {"type": "open_app", "app": "com.MobileTicket"},
        None,
    ),
    (
        '<tool_call>\n{"name": "mobile_use", "arguments": "{\\"action\\": \\"click\\", \\"coordinate\\": [4, 6]}"}\n</tool_call>',
        {"type": "click", "x": 4, "y": 3},
        None,
    ),
    (
        "<tool_call>\n{'name': 'mobile_use', 'arguments': {'action': 'click', 'coordinate': [8, 8]}}\n</tool_call>",
        {"type": "click", "x": 8, "y": 4},
        None,
    ),
    (
        '{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [50, 60]}}',
        {"type": "click", "x": 50, "y": 30},
        None,
    ),
    (
        tc("mobile_use", '{"action": "click", "coordinate": [100.4, 200.6]}'),
        {"type": "click", "x": 100, "y": 100},
        None,
    ),
    (tc("mobile_use", '{"action": "click", "coordinate": [5000, 200]}'), ERR, None),
    (tc("computer_use", '{"action": "left_click", "coordinate": [1, 2]}'), ERR, None),
    (tc("mobile_use", '{"action": "click"}'), ERR, None),
    (tc("mobile_use", '{"action": "scroll", "direction": "down"}'), ERR, None),
    ("I think the task is done, the ticket is booked.", ERR, None),
    ("", ERR, None),
    ('<tool_call>\n{"name": "mobile_use", "arguments": {"action": "click", "coordin', ERR, None),
    (
        tc("mobile_use", '{"action": "click", "coordinate": [1, 2]}')
        + "\n"
        + tc("mobile_use", '{"action": "type", "text": "x"}'),
        {"type": "click", "x": 1, "y": 1},
        None,
    ),
    (
        'Thought: open the date picker\nAction: "tap the date field"\n'
        + tc("mobile_use", '{"action": "click", "coordinate": [20, 40]}'),
        {"type": "click", "x": 20, "y": 20},
        "date picker",
    ),
    (tc("mobile_use", '{"action": "type", "text": ""}'), ERR, None),
    (
        tc("mobile_use", '{"action": "click", "coordinate": [90, 190, 110, 210]}'),
        {"type": "click", "x": 100, "y": 100},
        None,
    ),
    (tc("mobile_use", '{"action": "terminate", "status": "done"}'), ERR, None),
    (tc("mobile_use", '{"coordinate": [1, 2]}'), ERR, None),
]

UITARS_CASES = [
    (
        "Thought: 点击搜索按钮\nAction: click(start_box='<|box_start|>(100,200)<|box_end|>')",
        {"type": "click", "x": 100, "y": 100},
        "搜索",
    ),
    ("Thought: tap\nAction: click(start_box='(100,200)')", {"type": "click", "x": 100, "y": 100}, "tap"),
    (
        "Thought: tap\nAction: click(point='<point>100 200</point>')",
        {"type": "click", "x": 100, "y": 100},
        None,
    ),
    ("Action: click(start_box='(90,190,110,210)')", {"type": "click", "x": 100, "y": 100}, None),
    (
        "Thought: hold\nAction: long_press(start_box='(300,400)')",
        {"type": "long_press", "x": 300, "y": 200, "duration_ms": 800},
        None,
    ),
    (
        "Thought: type\nAction: type(content='It\\'s 5 o\\'clock')",
        {"type": "type", "text": "It's 5 o'clock"},
        None,
    ),
    ("Thought: type\nAction: type(content='It's here')", {"type": "type", "text": "It's here"}, None),
    ("Thought: search\nAction: type(content='北京南\\n')", {"type": "type", "text": "北京南"}, None),
    (
        "Thought: more\nAction: scroll(start_box='(500,1000)', direction='down')",
        {"type": "swipe", "x": 500, "y": 500, "x2": 500, "y2": 100, "duration_ms": 300},
        None,
    ),
    (
        "Thought: back up\nAction: scroll(direction='up')",
        {"type": "swipe", "x": 500, "y": 500, "x2": 500, "y2": 900, "duration_ms": 300},
        None,
    ),
    (
        "Action: scroll(start_box='(500,1600)', end_box='(500,400)')",
        {"type": "swipe", "x": 500, "y": 800, "x2": 500, "y2": 200, "duration_ms": 300},
        None,
    ),
    (
        "Action: drag(start_box='<|box_start|>(10,20)<|box_end|>', end_box='<|box_start|>(30,40)<|box_end|>')",
        {"type": "swipe", "x": 10, "y": 10, "x2": 30, "y2": 20, "duration_ms": 300},
        None,
    ),
    ("Thought: go back\nAction: press_back()", {"type": "key", "key": "back"}, "go back"),
    ("Thought: home\nAction: press_home()", {"type": "key", "key": "home"}, None),
    ("Action: press_enter()", {"type": "key", "key": "enter"}, None),
    ("Action: hotkey(key='enter')", {"type": "key", "key": "enter"}, None),
    ("Action: hotkey(key='ctrl c')", ERR, None),
    (
        "Thought: the price is shown\nAction: finished(content='¥553.5')",
        {"type": "answer", "text": "¥553.5"},
        "price",
    ),
    ("Thought: done\nAction: finished()", {"type": "terminate", "status": "success"}, None),
    (
        "Thought: I need the user's password\nAction: call_user()",
        {"type": "terminate", "status": "failure"},
        None,
    ),
    ("Thought: loading\nAction: wait()", {"type": "wait", "seconds": 1.0}, None),
    (
        "Thought: open it\nAction: open_app(app_name='铁路12306')",
        {"type": "open_app", "app": "铁路12306"},
        None,
    ),
    (
        "Reflection: the last tap missed.\nAction_Summary: tap the list\nAction: click(start_box='(1,2)')",
        {"type": "click", "x": 1, "y": 1},
        "tap the list",
    ),
    (
        "Thought: two\nAction: click(start_box='(1,2)')\n\ntype(content='x')",
        {"type": "click", "x": 1, "y": 1},
        None,
    ),
    ("click(start_box='(4,8)')", {"type": "click", "x": 4, "y": 4}, None),
    ("Thought: I will click the button", ERR, None),
    ("Thought: hover\nAction: hover(start_box='(1,2)')", ERR, None),
    ("Thought: hmm\nAction: click()", ERR, None),
    ("Action: scroll(start_box='(1,2)', direction='sideways')", ERR, None),
    ("Action: click(start_box='(5000,200)')", ERR, None),
    ("Action: type(content='')", ERR, None),
    ("Thought: fenced\nAction: `click(start_box='(6,6)')`", {"type": "click", "x": 6, "y": 3}, None),
    (
        "Thought: double\nAction: left_double(start_box='(6,6)')",
        {"type": "double_click", "x": 6, "y": 3},
        None,
    ),
    ("Thought: truncated\nAction: click(start_box='(6,", ERR, None),
]

JSON_CASES = [
    (
        'I will tap search.\n```json\n{"thought": "tap search", "action": {"type": "click", "x": 500, "y": 120}}\n```',
        {"type": "click", "x": 500, "y": 120},
        "tap search",
    ),
    ('{"type": "click", "x": 1, "y": 2}', {"type": "click", "x": 1, "y": 2}, None),
    (
        'Tap the button: {"type": "click", "x": 3, "y": 4}',
        {"type": "click", "x": 3, "y": 4},
        "Tap the button",
    ),
    ('```json{"type": "key", "key": "back"}```', {"type": "key", "key": "back"}, None),
    ('```\n{"type": "key", "key": "home"}\n```', {"type": "key", "key": "home"}, None),
    ('{"action_type": "click", "x": 5, "y": 6}', {"type": "click", "x": 5, "y": 6}, None),
    ('{"type": "click", "x": 512.4, "y": 99.6}', {"type": "click", "x": 512, "y": 100}, None),
    (
        '{"type": "swipe", "x": 500, "y": 800, "x2": 500, "y2": 200}',
        {"type": "swipe", "x": 500, "y": 800, "x2": 500, "y2": 200, "duration_ms": 300},
        None,
    ),
    ('{"type": "type", "text": "张三"}', {"type": "type", "text": "张三"}, None),
    ('{"type": "answer", "text": "1234.5元"}', {"type": "answer", "text": "1234.5元"}, None),
    ('{"type": "terminate", "status": "failure"}', {"type": "terminate", "status": "failure"}, None),
    ('{"type": "terminate"}', {"type": "terminate", "status": "success"}, None),
    (
        '{"type": "open_app", "app": "com.chinamworld.main"}',
        {"type": "open_app", "app": "com.chinamworld.main"},
        None,
    ),
    ('{"type": "wait", "seconds": 2}', {"type": "wait", "seconds": 2.0}, None),
    (
        '{"type": "long_press", "x": 1, "y": 1, "duration_ms": 1500}',
        {"type": "long_press", "x": 1, "y": 1, "duration_ms": 1500},
        None,
    ),
    ('{"type": "double_click", "x": 7, "y": 7}', {"type": "double_click", "x": 7, "y": 7}, None),
    ('{"type": "key", "key": "recent"}', {"type": "key", "key": "recent"}, None),
    ('{"type": "click", "x": 1200, "y": 5}', ERR, None),
    ('{"type": "scroll", "direction": "down"}', ERR, None),
    ('{"type": "click", "x": 5}', ERR, None),
    ('{"type": "click", "x": 5, "y": 5, "button": "left"}', ERR, None),
    ("click the search button", ERR, None),
    ("", ERR, None),
    ('[{"type": "click", "x": 1, "y": 1}]', {"type": "click", "x": 1, "y": 1}, None),
    ('```json\n{"type": "click", "x": 1, ', ERR, None),
    ('{"thought": "first"} then {"type": "click", "x": 1, "y": 1}', ERR, None),
    ('{"action": "click"}', ERR, None),
    (
        'I see {weird} braces, so: {"type": "click", "x": 9, "y": 9}',
        {"type": "click", "x": 9, "y": 9},
        "weird",
    ),
    ('{"type": "key", "key": "menu"}', ERR, None),
    (
        '```json\n{"thought": "✓ done", "action": {"type": "terminate", "status": "success"}}\n```',
        {"type": "terminate", "status": "success"},
        "done",
    ),
    ('{"type": "type", "text": ""}', ERR, None),
]


def _check(fmt_name: str, text: str, expected: dict | None, thought: str | None) -> None:
    parsed = get_format(fmt_name).parse(text, SCREEN)
    if expected is None:
        assert parsed.action is None, f"expected a format error, got {parsed.action}"
        assert parsed.error
    else:
        assert parsed.error is None, parsed.error
        assert parsed.action is not None
        assert action_to_dict(parsed.action) == expected
    if thought is not None:
        assert parsed.thought is not None and thought in parsed.thought


@pytest.mark.parametrize(("text", "expected", "thought"), QWEN_CASES)
def test_qwen_mobile_parser(text, expected, thought):
    _check("qwen-mobile", text, expected, thought)


@pytest.mark.parametrize(("text", "expected", "thought"), UITARS_CASES)
def test_ui_tars_parser(text, expected, thought):
    _check("ui-tars", text, expected, thought)


@pytest.mark.parametrize(("text", "expected", "thought"), JSON_CASES)
def test_json_parser(text, expected, thought):
    _check("json", text, expected, thought)


def test_case_counts():
    assert min(len(QWEN_CASES), len(UITARS_CASES), len(JSON_CASES)) >= 30
    # every list includes broken outputs
    assert all(sum(c[1] is None for c in cases) >= 6 for cases in (QWEN_CASES, UITARS_CASES, JSON_CASES))


def test_normalised_variants_do_not_rescale():
    for name, text in [
        ("qwen3-mobile", tc("mobile_use", '{"action": "click", "coordinate": [999, 0]}')),
        ("ui-tars-norm", "Action: click(start_box='(1000,0)')"),
    ]:
        parsed = get_format(name).parse(text, ImageSize(392, 868))
        assert parsed.action == Click(x=1000, y=0)
    # Qwen3-VL's grid is 999 wide: its 499.5 is realbench's 500
    parsed = get_format("qwen3-mobile").parse(
        tc("mobile_use", '{"action": "click", "coordinate": [999, 999]}'), ImageSize(392, 868)
    )
    assert parsed.action == Click(x=1000, y=1000)
    # the pixel variant of the same output is relative to the resized image
    parsed = get_format("qwen-mobile").parse(
        tc("mobile_use", '{"action": "click", "coordinate": [196, 434]}'), ImageSize(393, 869)
    )
    assert parsed.action == Click(x=500, y=500)


ROUND_TRIP = [
    Click(x=120, y=640),
    LongPress(x=10, y=990),
    Swipe(x=500, y=800, x2=500, y2=200),
    Type(text="北京 南 'x'"),
    KeyPress(key=Key.BACK),
    KeyPress(key=Key.HOME),
    KeyPress(key=Key.ENTER),
    OpenApp(app="com.MobileTicket"),
    Wait(),
    Answer(text="¥1,234.50"),
    Terminate(status=TerminateStatus.SUCCESS),
    Terminate(status=TerminateStatus.FAILURE),
]


@pytest.mark.parametrize("name", format_names())
def test_render_then_parse_round_trips(name):
    fmt = get_format(name)
    for action in ROUND_TRIP:
        text = fmt.render(action, SCREEN, thought="because")
        parsed = fmt.parse(text, SCREEN)
        if fmt.coords is CoordSpace.NORM_999 and parsed.action is not None:
            # 1001 realbench values on a 1000-value grid: one of them lands a unit away
            got, want = parsed.action.model_dump(), action.model_dump()
            assert got.keys() == want.keys(), (name, text, parsed)
            for key, value in want.items():
                if key in ("x", "y", "x2", "y2"):
                    assert abs(got[key] - value) <= 1, (name, text, parsed)
                else:
                    assert got[key] == value, (name, text, parsed)
        else:
            assert parsed.action == action, (name, text, parsed)
        assert parsed.thought == "because"
    if name == "json" or name.startswith("ui-tars"):
        assert fmt.parse(fmt.render(DoubleClick(x=3, y=4), SCREEN), SCREEN).action == DoubleClick(x=3, y=4)


def test_unknown_format_names_the_known_ones():
    with pytest.raises(UnknownNameError) as info:
        get_format("llava")
    assert "qwen-mobile" in str(info.value)
