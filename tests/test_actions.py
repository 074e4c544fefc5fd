import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from realbench.actions import (
    ACTION_TYPES,
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
    action_from_json,
    action_to_json,
    describe_action,
    parse_action,
)
from realbench.errors import ActionError

EXAMPLES = [
    Click(x=0, y=1000),
    DoubleClick(x=500, y=500),
    LongPress(x=10, y=20, duration_ms=1200),
    Swipe(x=500, y=800, x2=500, y2=200),
    Type(text="北京南"),
    KeyPress(key=Key.BACK),
    KeyPress(key=Key.RECENT),
    OpenApp(app="com.MobileTicket"),
    Wait(seconds=0.5),
    Answer(text="G101"),
    Terminate(status=TerminateStatus.FAILURE),
]


@pytest.mark.parametrize("action", EXAMPLES, ids=lambda a: a.type)
def test_round_trip(action):
    text = action_to_json(action)
    assert json.loads(text)["type"] == action.type
    assert action_from_json(text) == action


def test_every_action_type_has_an_example():
    assert {a.type for a in EXAMPLES} == set(ACTION_TYPES)


coords = st.integers(min_value=0, max_value=1000)


@given(coords, coords, coords, coords)
def test_swipe_round_trip_any_coordinates(x, y, x2, y2):
    a = Swipe(x=x, y=y, x2=x2, y2=y2)
    assert action_from_json(action_to_json(a)) == a
    assert a.point == (x2, y2)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"type": "click", "x": 1001, "y": 5}, "x"),
        ({"type": "click", "x": 5}, "y"),
        ({"type": "click", "x": -1, "y": 5}, "x"),
        ({"type": "tap", "x": 1, "y": 5}, "type"),
        ({"x": 1, "y": 5}, "type"),
        ({"type": "key", "key": "volume_up"}, "key"),
        ({"type": "type", "text": ""}, "text"),
        ({"type": "terminate", "status": "maybe"}, "status"),
        ({"type": "click", "x": 1, "y": 2, "z": 3}, "z"),
        ({"type": "swipe", "x": 1, "y": 2, "x2": 3}, "y2"),
        ({"type": "wait", "seconds": 0}, "seconds"),
    ],
)
def test_invalid_actions_name_the_field(data, field):
    with pytest.raises(ActionError) as info:
        parse_action(data)
    assert info.value.field == field
    assert repr(field) in str(info.value)


def test_non_object_and_non_json_are_refused():
    with pytest.raises(ActionError, match="JSON object"):
        parse_action(["click", 1, 2])
    with pytest.raises(ActionError, match="not JSON"):
        action_from_json("click(1,2)")


def test_actions_are_immutable_and_final_flags():
    a = Click(x=1, y=2)
    with pytest.raises(ValidationError):
        a.x = 5  # type: ignore[misc]
    assert Answer(text="x").is_final and Terminate().is_final and not a.is_final
    assert describe_action(a) == "click(1,2)"
