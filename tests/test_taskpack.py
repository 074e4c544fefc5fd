"""Pack schema: a valid pack parses; every malformed pack is refused naming file, task and field."""

import copy
from datetime import date

import pytest
import yaml

from realbench.errors import ConfigError, PackError
from realbench.taskpack import AnswerType, check_pack, load_pack, parse_pack

VALID = {
    "app": "train_ticketing",
    "clone": "train_ticketing",
    "real_app": {
        "package": "com.MobileTicket",
        "name": "铁路12306",
        "forbidden": [{"text": "立即支付"}],
    },
    "policy": {"require_boundary_tags": ["booking"]},
    "tasks": [
        {
            "id": "book_next_monday",
            "instruction": "预订{date}从{from}到{to}的二等座",
            "params": {
                "from": {"type": "choice", "values": ["北京", "上海"]},
                "to": {"type": "choice", "values": ["南京", "杭州"], "weights": [1, 3]},
                "date": {"type": "relative_date", "exprs": ["next:mon", "after_next:fri"]},
                "n": {"type": "int", "min": 1, "max": 3},
            },
            "difficulty": 3,
            "tags": ["booking"],
            "answer": {"type": "none"},
            "clone": {
                "setup": {"seed": 3, "clock": "2026-03-04T09:00:00"},
                "verifier": {"name": "order_submitted", "args": {"seat": "二等座", "to": "{to}"}},
            },
            "real": {"boundary": [{"text": "提交订单"}], "checks": [{"selector": {"text": "{to}"}}]},
            "judge": {"rubric": "The order form shows {to} and 二等座 before submission."},
            "golden": [
                {"tap": {"resource_id": "from_station"}},
                {"type": {"text": "{from}", "into": {"resource_id": "station_search"}}},
                {"scroll_to": {"selector": {"text": "{to}"}}},
                {"tap": {"text": "提交订单"}},
                {"terminate": "success"},
            ],
        },
        {
            "id": "cheapest_price",
            "instruction": "明天北京到上海最便宜的票价是多少？",
            "difficulty": 1,
            "answer": {"type": "number", "tolerance": 0.5},
            "clone": {"verifier": {"name": "answer_cheapest"}},
            "judge": {"rubric": "The answer equals the lowest price shown."},
            "golden": [{"answer": {"read": {"resource_id": "price", "nth": 0}, "regex": "([0-9.]+)"}}],
        },
    ],
}


def mutate(fn):
    raw = copy.deepcopy(VALID)
    fn(raw)
    return raw


def test_valid_pack_parses_and_samples_deterministically():
    pack = parse_pack(copy.deepcopy(VALID), "mem.yaml")
    task = pack.task("book_next_monday")
    a = task.instantiate(7, date(2026, 3, 4))
    b = task.instantiate(7, date(2026, 3, 4))
    assert a.params == b.params
    assert a.instruction.startswith("预订下")
    assert a.params["date_date"] in ("2026-03-09", "2026-03-20")
    assert 1 <= a.params["n"] <= 3
    many = {task.instantiate(s, date(2026, 3, 4)).params["to"] for s in range(50)}
    assert many == {"南京", "杭州"}
    assert a.verifier_args["to"] == a.params["to"]
    assert a.boundary()[0].text == "提交订单"
    assert pack.task("cheapest_price").answer.type is AnswerType.NUMBER
    assert check_pack(pack) == []


def test_an_instance_holds_a_loaded_task_and_nothing_else():
    from pydantic import ValidationError

    from realbench.taskpack import TaskInstance

    task = parse_pack(copy.deepcopy(VALID), "mem.yaml").task("book_next_monday")
    instance = task.instantiate(7, date(2026, 3, 4))
    assert instance.task is task
    with pytest.raises(ValidationError, match="loaded Task"):
        TaskInstance(task=task.model_dump(), seed=1, params={}, instruction="x")


def test_sampling_does_not_touch_global_random_state():
    import random

    import numpy as np

    random.seed(1)
    np.random.seed(1)
    before = (random.random(), np.random.random())
    random.seed(1)
    np.random.seed(1)
    parse_pack(copy.deepcopy(VALID)).task("book_next_monday").instantiate(3, date(2026, 3, 4))
    assert (random.random(), np.random.random()) == before


MALFORMED = [
    (
        "missing instruction",
        lambda r: r["tasks"][0].pop("instruction"),
        "book_next_monday",
        "instruction",
        "Field required",
    ),
    (
        "difficulty 5",
        lambda r: r["tasks"][0].update(difficulty=5),
        "book_next_monday",
        "difficulty",
        "less than or equal to 4",
    ),
    (
        "unknown param type",
        lambda r: r["tasks"][0]["params"].update(x={"type": "colour"}),
        "book_next_monday",
        "params.x",
        "does not match any of the expected tags",
    ),
    (
        "int range reversed",
        lambda r: r["tasks"][0]["params"].update(n={"type": "int", "min": 5, "max": 1}),
        "book_next_monday",
        "params.n",
        "min (5) is greater than max (1)",
    ),
    (
        "bad relative date",
        lambda r: r["tasks"][0]["params"].update(date={"type": "relative_date", "exprs": ["next:funday"]}),
        "book_next_monday",
        "params.date.exprs",
        "unknown weekday",
    ),
    (
        "undeclared placeholder",
        lambda r: r["tasks"][0].update(instruction="去{city}"),
        "book_next_monday",
        "(task)",
        "placeholders ['city'] are not declared",
    ),
    (
        "plan step with two actions",
        lambda r: r["tasks"][0]["golden"].append({"tap": {"text": "a"}, "key": "back"}),
        "book_next_monday",
        "golden.5",
        "exactly one of",
    ),
    (
        "empty selector",
        lambda r: r["tasks"][0]["golden"].insert(0, {"tap": {}}),
        "book_next_monday",
        "golden.0.tap",
        "at least one of",
    ),
    (
        "bad key",
        lambda r: r["tasks"][0]["golden"].insert(0, {"key": "volume"}),
        "book_next_monday",
        "golden.0.key",
        "'back', 'home', 'enter' or 'recent'",
    ),
    (
        "choice answer without choices",
        lambda r: r["tasks"][1].update(answer={"type": "choice"}),
        "cheapest_price",
        "answer",
        "needs a non-empty 'choices'",
    ),
    (
        "answer expected but never given",
        lambda r: r["tasks"][1].update(golden=[{"key": "back"}]),
        "cheapest_price",
        "(task)",
        "never answers",
    ),
    (
        "duplicate ids",
        lambda r: r["tasks"][1].update(id="book_next_monday"),
        None,
        "(task)",
        "duplicate task ids",
    ),
    (
        "bad package",
        lambda r: r["real_app"].update(package="not a package"),
        None,
        "real_app.package",
        "should match pattern",
    ),
    (
        "unknown field",
        lambda r: r["tasks"][0].update(colour="red"),
        "book_next_monday",
        "colour",
        "Extra inputs are not permitted",
    ),
    (
        "bad task id",
        lambda r: r["tasks"][0].update(id="Book Now!"),
        "Book Now!",
        "id",
        "should match pattern",
    ),
    (
        "no verifier",
        lambda r: r["tasks"][0]["clone"].pop("verifier"),
        "book_next_monday",
        "clone.verifier",
        "Field required",
    ),
    (
        "empty golden plan",
        lambda r: r["tasks"][1].update(golden=[]),
        "cheapest_price",
        "golden",
        "at least 1 item",
    ),
    (
        "weights mismatch",
        lambda r: r["tasks"][0]["params"]["to"].update(weights=[1]),
        "book_next_monday",
        "params.to",
        "one entry per value",
    ),
]


@pytest.mark.parametrize(("name", "fn", "task", "field", "message"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_packs_are_refused_precisely(name, fn, task, field, message):
    with pytest.raises(PackError) as info:
        parse_pack(mutate(fn), "taskpacks/x/pack.yaml")
    err = info.value
    assert err.path == "taskpacks/x/pack.yaml"
    assert "taskpacks/x/pack.yaml" in str(err)
    matching = [p for p in err.problems if p.task_id == task and p.field == field and message in p.message]
    assert matching, f"no problem ({task}, {field}, {message!r}) in {err.problems}"


def test_check_pack_safety_rules():
    # a plan that goes past the commit boundary
    raw = mutate(lambda r: r["tasks"][0]["golden"].insert(4, {"tap": {"text": "确认"}}))
    problems = check_pack(parse_pack(raw))
    assert any(p.field == "golden.3" and "past a commit boundary" in p.message for p in problems)
    # tapping an always-forbidden control that the task does not declare
    raw = mutate(lambda r: r["tasks"][1].update(golden=[{"tap": {"text": "立即支付"}}, {"answer": "1"}]))
    problems = check_pack(parse_pack(raw))
    assert any(p.task_id == "cheapest_price" and "always-forbidden" in p.message for p in problems)
    # booking-tagged task without a boundary
    raw = mutate(lambda r: r["tasks"][0]["real"].update(boundary=[]))
    problems = check_pack(parse_pack(raw))
    assert any(p.field == "real.boundary" for p in problems)
    # unknown clone / verifier names
    pack = parse_pack(copy.deepcopy(VALID))
    problems = check_pack(pack, has_clone=lambda n: True, has_verifier=lambda c, n: n == "order_submitted")
    assert [(p.task_id, p.field) for p in problems] == [("cheapest_price", "clone.verifier.name")]
    assert check_pack(pack, has_clone=lambda n: False)[0].field == "clone"


def test_load_pack_errors(tmp_path):
    with pytest.raises(ConfigError, match="no task pack"):
        load_pack(tmp_path / "missing")
    bad = tmp_path / "pack.yaml"
    bad.write_text("app: [unclosed\n", encoding="utf-8")
    with pytest.raises(PackError, match="yaml line"):
        load_pack(tmp_path)
    bad.write_text("- just a list\n", encoding="utf-8")
    with pytest.raises(PackError, match="YAML mapping"):
        load_pack(bad)
    bad.write_text(yaml.safe_dump(VALID, allow_unicode=True), encoding="utf-8")
    assert load_pack(tmp_path).path == str(bad)
