"""Selector matching on the real apps' strings: letter-spaced train numbers and long row strings.

The false matches come first: folding must not loosen any match that has nothing to do with a
letter-spaced run.
"""

from __future__ import annotations

import pytest

from realbench.golden import GoldenAgent
from realbench.hierarchy import Hierarchy, Node, Selector, fold_spacing
from realbench.taskpack import PlanStep

ROW = "G 1 3 5 0次列车14点24分从海口东出发16点16分到达三 亚,历时1时52分,"


def node(text: str, desc: str = "") -> Node:
    return Node(text=text, content_desc=desc)


# --- what must NOT match --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("selector", "text"),
    [
        (Selector(text_contains="¥419"), "二等 ¥41 9折"),  # a two-digit token is not a spaced run
        (Selector(text_contains="419"), "二等 ¥41 9折"),
        (Selector(text="G7004"), "G 7 0 0 4 1"),  # a longer number is another train
        (Selector(text="G7004"), "G 7 0 0 4次列车"),  # exact stays exact
        (Selector(text_contains="G7004次"), "G 7 0 0 4 1次列车"),
        (Selector(text_contains="G1次列车"), ROW),  # G1 is not G1350
        (Selector(text="G135"), "G 1 3 5 0"),
        (Selector(text_contains="三亚"), ROW),  # CJK spacing is not folded by text/text_contains
        (Selector(text="确认支付"), "确认 支付"),
        (Selector(text_contains="ab"), "a bc"),  # 'bc' is a word, not a spaced letter
        (Selector(text_contains="2等"), "2 等"),  # a digit next to a CJK character stays apart
        (Selector(text_contains="Ｇ7004"), "G 7 0 0 4"),  # no NFKC: full-width stays different
        (Selector(text_contains="g7004"), "G 7 0 0 4"),  # no case folding
        (Selector(text_regex=r"^G\d{5}"), "G 7 0 0 4次"),
        (Selector(text_pattern="G7004次列车*"), "G 7 0 0 4 1次列车14点"),
        (Selector(text_pattern="G7004次列车"), "G 7 0 0 4次列车14点"),  # whole text must match
        (Selector(text_pattern="*从北京出发*"), ROW),
    ],
)
def test_no_false_match(selector: Selector, text: str) -> None:
    assert not selector.matches(node(text)), (selector, text)


def test_fold_leaves_unrelated_text_alone() -> None:
    for text in ("二等 ¥41 9折", "共 3 趟", "出发站: 北京", "10 20 30", "Wi Fi", "确认 支付", "三 亚"):
        assert fold_spacing(text) == text


# --- what must match ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("selector", "text"),
    [
        (Selector(text_contains="G7004"), "G 7 0 0 4次列车"),
        (Selector(text_contains="G1350次列车"), ROW),
        (Selector(text_contains="C7441"), "C 7 4 4 1次列车07点10分"),
        (Selector(text="G7004"), "G 7 0 0 4"),
        (Selector(text="G 7 0 0 4"), "G7004"),  # folded on both sides
        (Selector(text_regex=r"G1350次列车\d+点"), ROW),
        (Selector(text_regex=r"G 1 3 5 0次"), ROW),  # a regex written for the raw string still works
        (Selector(text_pattern="G1350次列车*从海口东出发*到达三亚*"), ROW),  # all whitespace ignored
        (Selector(text_pattern="*次列车*"), ROW),
        (Selector(text="¥41 9折"), "¥41 9折"),  # raw equality is never lost
        (Selector(text_contains="1 9折"), "二等 ¥41 9折"),
    ],
)
def test_spaced_strings_match(selector: Selector, text: str) -> None:
    assert selector.matches(node(text)), (selector, text)


def test_text_folds_content_desc_too() -> None:
    assert Selector(text="G7004").matches(node("", desc="G 7 0 0 4"))


def test_text_pattern_fills_placeholders() -> None:
    sel = Selector(text_pattern="{train}次列车*从{from}出发*").format({"train": "G1350", "from": "海口东"})
    assert sel.matches(node(ROW))
    assert not sel.format({}).matches(node("G 1 3 5 1次列车14点从海口东出发"))


def test_find_uses_the_same_matching() -> None:
    xml = (
        '<hierarchy rotation="0"><node class="android.widget.Button" text="G 7 0 0 4次列车08点00分从北京南出发" '
        'bounds="[0,100][1080,300]" clickable="true"/>'
        '<node class="android.widget.Button" text="G 7 0 0 4 1次列车" bounds="[0,300][1080,500]" clickable="true"/>'
        "</hierarchy>"
    )
    found = Hierarchy(xml).find(Selector(text_contains="G7004次列车"))
    assert [n.bounds.top for n in found] == [100]


def test_answer_read_closes_up_the_train_number() -> None:
    xml = (
        '<hierarchy rotation="0"><node class="android.widget.Button" text="G 7 0 0 4次列车08点00分从北京南出发" '
        'bounds="[0,100][1080,300]" clickable="true"/></hierarchy>'
    )
    agent = GoldenAgent()  # no instance: no parameters
    step = PlanStep.model_validate({"answer": {"read": {"text_pattern": "*次列车*"}, "regex": r"^(\w+)次"}})
    assert agent._answer_text(step.answer, Hierarchy(xml)) == "G7004"  # type: ignore[arg-type]
    whole = PlanStep.model_validate({"answer": {"read": {"text_contains": "G7004"}}})
    assert agent._answer_text(whole.answer, Hierarchy(xml)).startswith("G7004次列车")  # type: ignore[arg-type]


def test_a_pattern_stop_names_its_control_for_the_interlock() -> None:
    from devices.farm.stop_labels import names_stop

    stop = Selector(text_pattern="提交订单*")
    assert names_stop(stop, node("提交 订单 ¥553.0"), subtree=False)  # searched, spacing ignored
    assert names_stop(stop, node("", desc="提交订单"), subtree=False)
    assert not names_stop(stop, node("返回"), subtree=False)


def test_check_pack_sees_a_pattern_step_reach_a_stop() -> None:
    from realbench.taskpack import _may_hit, _same_control

    assert _may_hit(Selector(text_pattern="提交*"), Selector(text="提交订单"))
    assert not _may_hit(Selector(text_pattern="预订*"), Selector(text="提交订单"))
    assert _same_control(Selector(text_pattern="*次列车*"), Selector(text_pattern="*次列车*"))
