import pytest

from realbench.actions import Click, DoubleClick, Key, KeyPress, LongPress, Swipe, Type
from realbench.boundary import boundary_hit
from realbench.errors import RealbenchError
from realbench.hierarchy import Bounds, Hierarchy, Selector

XML = """<?xml version='1.0' encoding='UTF-8'?>
<hierarchy rotation="0">
  <node index="0" text="" resource-id="" class="android.widget.FrameLayout" package="com.MobileTicket" content-desc="" clickable="false" bounds="[0,0][1080,2400]">
    <node index="0" text="订单" resource-id="com.MobileTicket:id/title" class="android.widget.TextView" package="com.MobileTicket" content-desc="" clickable="false" bounds="[0,0][1080,200]" />
    <node index="1" text="" resource-id="com.MobileTicket:id/name" class="android.widget.EditText" package="com.MobileTicket" content-desc="" clickable="true" focused="true" bounds="[40,300][1040,420]" />
    <node index="2" text="" resource-id="com.MobileTicket:id/btn_submit" class="android.widget.Button" package="com.MobileTicket" content-desc="提交" clickable="true" bounds="[40,2200][1040,2360]">
      <node index="0" text="提交订单" resource-id="" class="android.widget.TextView" package="com.MobileTicket" content-desc="" clickable="false" bounds="[400,2240][680,2320]" />
    </node>
  </node>
</hierarchy>"""

SUBMIT = [Selector(text="提交订单")]
SCREEN = (1080, 2400)


def norm(px, py):
    return {"x": round(px * 1000 / 1079), "y": round(py * 1000 / 2399)}


def test_parse_and_find():
    h = Hierarchy(XML)
    assert len(h.nodes) == 5
    assert h.find_one(Selector(resource_id="btn_submit")).content_desc == "提交"
    assert h.find_one(Selector(resource_id="com.MobileTicket:id/title")).text == "订单"
    assert h.find_one(Selector(text_contains="提交")).text == "提交订单"
    assert h.find_one(Selector(text="提交")).resource_id.endswith("btn_submit")  # content-desc counts as text
    assert h.find_one(Selector(text="nope")) is None
    assert h.screen == Bounds(0, 0, 1080, 2400)


def test_target_at_returns_clickable_ancestor_of_a_label():
    h = Hierarchy(XML)
    assert h.target_at(500, 2280).short_id == "btn_submit"
    assert h.target_at(500, 100) is None


def test_bad_xml_and_bad_selector():
    with pytest.raises(RealbenchError):
        Hierarchy("<hierarchy><node")
    with pytest.raises(ValueError):
        Selector()
    with pytest.raises(ValueError):
        Selector(text_regex="(")


@pytest.mark.parametrize(
    "action",
    [
        Click(x=500, y=950),  # inside the button
        Click(**norm(42, 2203)),  # near its corner (a normalised unit is 2.4 px tall here)
        Click(**norm(540, 2280)),  # on its label child
        DoubleClick(**norm(100, 2300)),
        LongPress(**norm(1000, 2350)),
        Swipe(x=500, y=500, x2=500, y2=950),  # ends on it
        Swipe(x=500, y=950, x2=505, y2=955),  # a tap-like swipe starting on it
    ],
    ids=lambda a: a.type,
)
def test_boundary_hits(action):
    hit = boundary_hit(action, Hierarchy(XML), SUBMIT, SCREEN)
    assert hit is not None
    assert "提交订单" in hit.describe()


@pytest.mark.parametrize(
    "action",
    [
        Click(x=500, y=40),
        Click(x=500, y=150),
        Swipe(x=500, y=950, x2=500, y2=300),
        KeyPress(key=Key.BACK),
        Type(text="x"),
    ],
    ids=lambda a: a.type,
)
def test_boundary_misses(action):
    assert boundary_hit(action, Hierarchy(XML), SUBMIT, SCREEN) is None


def test_enter_on_focused_boundary_control():
    xml = XML.replace('focused="true" ', "").replace(
        'content-desc="提交" clickable="true"', 'content-desc="提交" clickable="true" focused="true"'
    )
    assert boundary_hit(KeyPress(key=Key.ENTER), Hierarchy(xml), SUBMIT, SCREEN) is not None
    assert boundary_hit(KeyPress(key=Key.ENTER), Hierarchy(XML), SUBMIT, SCREEN) is None


def test_no_selectors_never_hits():
    assert boundary_hit(Click(x=500, y=950), Hierarchy(XML), [], SCREEN) is None
