"""The judge: deterministic checks first, then VLM judges (against the fake server), with caching."""

from __future__ import annotations

import io
import json

import pytest
from PIL import Image

from realbench.agents.client import ChatEndpoint
from realbench.agents.fake_server import FAKE_MODEL, FakeModelServer, Reply, RequestRules
from realbench.errors import ConfigError
from realbench.judge import JudgeCache, VLMJudge, VLMJudgeConfig, deterministic_verdict, judge_trajectory
from realbench.judge.judge_run import judge_run, parse_judge_spec
from realbench.judge.vlm import ImageSampling, parse_reply, pick_images
from realbench.outcome import EndReason, Outcome, VerdictSource
from realbench.taskpack import parse_pack
from realbench.trajectory import Trajectory, TrajectoryStep

PACK = parse_pack(
    {
        "app": "train_ticketing",
        "clone": "train_ticketing",
        "real_app": {"package": "com.MobileTicket", "name": "铁路12306"},
        "tasks": [
            {
                "id": "book",
                "instruction": "预订明天到{to}的二等座",
                "params": {"to": {"type": "choice", "values": ["南京"]}},
                "difficulty": 2,
                "clone": {"verifier": {"name": "order_submitted"}},
                "real": {
                    "boundary": [{"text": "提交订单"}],
                    "checks": [{"selector": {"text": "{to}"}, "description": "destination shown"}],
                },
                "judge": {"rubric": "The order form shows {to} and 二等座."},
                "golden": [{"tap": {"text": "提交订单"}}],
            },
            {
                "id": "price",
                "instruction": "最便宜的票价是多少？",
                "difficulty": 1,
                "answer": {"type": "number", "tolerance": 0.5},
                "clone": {"verifier": {"name": "answer_cheapest", "args": {"expected": "553.5"}}},
                "judge": {"rubric": "The answer equals the lowest price shown."},
                "golden": [{"answer": "553.5"}],
            },
            {
                "id": "toggle",
                "instruction": "打开消息通知",
                "difficulty": 1,
                "clone": {"verifier": {"name": "notifications_on"}},
                "judge": {"rubric": "Notifications are switched on in the final screen."},
                "golden": [{"tap": {"text": "消息通知"}}, {"terminate": "success"}],
            },
        ],
    }
)


def _png(color: tuple[int, int, int]) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (108, 240), color).save(buf, format="PNG")
    return buf.getvalue()


def _xml(*texts: str) -> str:
    nodes = "".join(
        f'<node text="{t}" bounds="[0,{i * 100}][1080,{i * 100 + 90}]" clickable="true"/>'
        for i, t in enumerate(texts)
    )
    return f'<hierarchy rotation="0">{nodes}</hierarchy>'


def _traj(
    task_id: str = "toggle",
    *,
    end=EndReason.TERMINATE,
    answer=None,
    final_xml=None,
    steps=3,
    status="success",
    outcome=Outcome.FAILURE,
) -> Trajectory:
    items = [
        TrajectoryStep(
            index=i,
            action={"type": "click", "x": 100 * i, "y": 200},
            thought=f"step {i}",
            screenshot=_png((i * 60, 0, 0)),
        )
        for i in range(steps - 1)
    ]
    last = (
        {"type": "terminate", "status": status}
        if end is EndReason.TERMINATE
        else {"type": "click", "x": 5, "y": 5}
    )
    if answer is not None:
        last = {"type": "answer", "text": answer}
    items.append(TrajectoryStep(index=steps - 1, action=last, screenshot=_png((0, 0, 200))))
    return Trajectory(
        task_id=task_id,
        instruction=PACK.task(task_id).instruction.replace("{to}", "南京"),
        params={"to": "南京"},
        steps=items,
        outcome=outcome,
        end_reason=end,
        answer=answer,
        final_screenshot=_png((0, 200, 0)),
        final_hierarchy=final_xml,
    )


def _judge(server: FakeModelServer, cache: JudgeCache | None = None, **kw) -> VLMJudge:
    endpoint = ChatEndpoint(
        base_url=server.base_url, model=FAKE_MODEL, backoff_s=0.01, max_retries=1, timeout_s=5
    )
    return VLMJudge(VLMJudgeConfig(name=kw.pop("name", "j1"), endpoint=endpoint, **kw), cache=cache)


OK = '{"success": true, "reason": "the switch is on", "confidence": 0.9}'


def test_structured_verdict_with_tokens_and_cost():
    with FakeModelServer([OK], rules=RequestRules(min_images=3, max_images=3)) as server:
        judge = _judge(server, price_in_per_mtok=1.0, price_out_per_mtok=2.0)
        v = judge.judge(PACK.task("toggle"), _traj())
        judge.close()
    assert server.problems == []
    assert v.success and not v.abstained and v.source is VerdictSource.JUDGE and v.name == "j1"
    assert v.confidence == 0.9 and v.reason == "the switch is on" and v.raw == OK
    assert v.tokens and v.tokens > 0 and v.cost_usd and v.cost_usd > 0
    text = server.requests[0].text()
    assert "Notifications are switched on" in text and "step 0" in text and "final screen" in text


def test_rubric_is_filled_with_the_episode_parameters():
    with FakeModelServer([OK]) as server:
        judge = _judge(server)
        judge.judge(PACK.task("book"), _traj("book", end=EndReason.BOUNDARY))
        judge.close()
    assert "The order form shows 南京 and 二等座." in server.requests[0].text()


def test_malformed_reply_is_retried_then_read():
    with FakeModelServer(
        ["The agent did well!", '```json\n{"success": false, "reason": "wrong day", "confidence": 0.7}\n```']
    ) as server:
        judge = _judge(server)
        v = judge.judge(PACK.task("toggle"), _traj())
        judge.close()
    assert not v.success and not v.abstained and v.reason == "wrong day"
    assert len(server.requests) == 2
    retry = server.requests[1].messages
    assert (
        retry[-2] == {"role": "assistant", "content": "The agent did well!"}
        and "could not be read" in retry[-1]["content"]
    )


def test_malformed_replies_end_in_abstention_never_a_guess():
    with FakeModelServer(["yes", '{"success": "probably"}', "{}"]) as server:
        judge = _judge(server, max_attempts=3)
        v = judge.judge(PACK.task("toggle"), _traj())
        judge.close()
    assert v.abstained and not v.success and v.source is VerdictSource.JUDGE
    assert v.raw == "{}" and len(server.requests) == 3 and v.tokens and v.tokens > 0


def test_judge_may_abstain_on_purpose():
    with FakeModelServer(
        ['{"success": null, "reason": "the final screen is cut off", "confidence": 0.2}']
    ) as server:
        judge = _judge(server)
        v = judge.judge(PACK.task("toggle"), _traj())
        judge.close()
    assert v.abstained and not v.success and "cut off" in v.reason


def test_endpoint_failure_abstains_and_is_not_cached(tmp_path):
    cache = JudgeCache(tmp_path)
    with FakeModelServer([Reply.error(500), Reply.error(500), OK]) as server:
        judge = _judge(server, cache=cache)
        first = judge.judge(PACK.task("toggle"), _traj())
        second = judge.judge(PACK.task("toggle"), _traj())
        judge.close()
    assert first.abstained and "endpoint failed" in first.reason
    assert second.success and not second.abstained


def test_cache_by_trajectory_content(tmp_path):
    cache = JudgeCache(tmp_path / "judge_cache")
    with FakeModelServer([OK], repeat_last=True) as server:
        judge = _judge(server, cache=cache)
        a = judge.judge(PACK.task("toggle"), _traj())
        b = judge.judge(PACK.task("toggle"), _traj())
        assert len(server.requests) == 1 and a == b
        again = _judge(server, cache=JudgeCache(tmp_path / "judge_cache"))  # a new process, same folder
        again.judge(PACK.task("toggle"), _traj())
        assert len(server.requests) == 1
        judge.judge(PACK.task("toggle"), _traj(steps=4))  # a different trajectory is judged anew
        assert len(server.requests) == 2
        other = _judge(server, cache=cache, name="j2")  # another judge has its own entries
        other.judge(PACK.task("toggle"), _traj())
        assert len(server.requests) == 3
        for j in (judge, again, other):
            j.close()
    assert cache.hits == 1


def test_image_sampling():
    assert pick_images(10, 3, ImageSampling.LAST) == [7, 8, 9]
    uniform = pick_images(10, 3, ImageSampling.UNIFORM)
    assert uniform[0] == 0 and uniform[-1] == 9 and len(uniform) == 3
    assert pick_images(2, 5, ImageSampling.UNIFORM) == [0, 1]


def test_parse_reply_rejects_non_verdicts():
    assert parse_reply('{"success": true, "reason": "x", "confidence": 0.5}').success is True
    assert parse_reply('Here: {"success": false}').success is False
    assert parse_reply('{"success": true, "confidence": 7}') is None
    assert parse_reply('{"reason": "x"}') is None
    assert parse_reply("no") is None


@pytest.mark.parametrize(
    ("task_id", "kwargs", "expected", "why"),
    [
        (
            "book",
            {"end": EndReason.BOUNDARY, "final_xml": _xml("南京", "二等座", "提交订单")},
            True,
            "checks passed",
        ),
        (
            "book",
            {"end": EndReason.BOUNDARY, "final_xml": _xml("上海", "提交订单")},
            False,
            "destination shown",
        ),
        ("book", {"end": EndReason.STEP_BUDGET}, False, "never reached"),
        ("price", {"end": EndReason.ANSWER, "answer": "¥553.50"}, True, "matches"),
        ("price", {"end": EndReason.ANSWER, "answer": "600元"}, False, "does not match"),
        ("price", {"end": EndReason.STEP_BUDGET}, False, "none was given"),
        ("toggle", {"end": EndReason.FORMAT_ERRORS}, False, "unparseable"),
        ("toggle", {"status": "failure"}, False, "declared the task failed"),
    ],
)
def test_deterministic_checks_decide_without_a_model(task_id, kwargs, expected, why):
    with FakeModelServer([OK]) as server:
        judge = _judge(server)
        expected_answer = "553.5" if task_id == "price" else None
        verdicts = judge_trajectory(
            PACK.task(task_id), _traj(task_id, **kwargs), [judge], expected_answer=expected_answer
        )
        judge.close()
    assert server.requests == []
    (v,) = verdicts
    assert v.source is VerdictSource.CHECKS and v.success is expected and why in v.reason


def test_unscored_aborts_are_not_judged():
    v = deterministic_verdict(PACK.task("toggle"), _traj(end=EndReason.ABORT, outcome=Outcome.ENV_INVALID))
    assert v is not None and v.abstained and "env_invalid" in v.reason


def test_undecidable_episodes_go_to_every_judge():
    with FakeModelServer([OK], repeat_last=True) as server:
        judges = [_judge(server, name="a"), _judge(server, name="b")]
        verdicts = judge_trajectory(PACK.task("toggle"), _traj(), judges)
        # an answer with no known truth also needs a judge
        more = judge_trajectory(
            PACK.task("price"), _traj("price", end=EndReason.ANSWER, answer="553.5"), judges[:1]
        )
        for j in judges:
            j.close()
    assert [v.name for v in verdicts] == ["a", "b"] and all(v.source is VerdictSource.JUDGE for v in verdicts)
    assert more[0].source is VerdictSource.JUDGE and len(server.requests) == 3


def test_judge_spec_parsing():
    assert parse_judge_spec("q72=http://h:8001/v1,Qwen/Qwen2.5-VL-72B-Instruct") == (
        "q72",
        "http://h:8001/v1",
        "Qwen/Qwen2.5-VL-72B-Instruct",
    )
    with pytest.raises(ConfigError):
        parse_judge_spec("http://h:8001/v1")


def test_judge_command_writes_verdicts_into_the_store(tmp_path):
    from realbench.episode import EpisodeResult, StepRecord
    from realbench.observation import ImageFormat
    from realbench.store import EpisodeKey, RunStore

    pack_dir = tmp_path / "pack"
    pack_dir.mkdir()
    import yaml

    raw = PACK.model_dump(mode="json", exclude_none=True)
    (pack_dir / "pack.yaml").write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")
    store_dir = tmp_path / "run"
    store = RunStore(store_dir)
    store.ensure_run(
        "r",
        pack="train_ticketing",
        app="train_ticketing",
        agent="openai:m",
        target="real",
        config={"pack": str(pack_dir)},
    )

    def result(task_id: str, end: EndReason, answer=None, outcome=Outcome.FAILURE) -> EpisodeResult:
        steps = [
            StepRecord(
                index=0,
                action={"type": "click", "x": 1, "y": 2},
                screenshot=_png((9, 9, 9)),
                image_format=ImageFormat.PNG,
                width=108,
                height=240,
            ),
            StepRecord(
                index=1,
                action={"type": "terminate", "status": "success"}
                if answer is None
                else {"type": "answer", "text": answer},
                screenshot=_png((1, 2, 3)),
                image_format=ImageFormat.PNG,
                width=108,
                height=240,
            ),
        ]
        return EpisodeResult(
            task_id=task_id,
            seed=0,
            instruction="x",
            params={},
            agent="openai:m",
            target="real",
            device={},
            outcome=outcome,
            end_reason=end,
            answer=answer,
            steps=steps,
            final_screenshot=_png((0, 0, 0)),
            final_image_format=ImageFormat.PNG,
        )

    ids = [
        store.write_episode(
            "r", EpisodeKey("toggle", 0, 0), 0, "train_ticketing", result("toggle", EndReason.TERMINATE)
        ),
        store.write_episode(
            "r",
            EpisodeKey("price", 0, 0),
            0,
            "train_ticketing",
            result("price", EndReason.ANSWER, answer="553.5"),
        ),
        store.write_episode(
            "r",
            EpisodeKey("book", 0, 0),
            0,
            "train_ticketing",
            result("book", EndReason.ABORT, outcome=Outcome.ENV_INVALID),
        ),
    ]
    store.close()
    with FakeModelServer([OK], repeat_last=True) as server:
        summary = judge_run(
            store_dir, [f"q={server.base_url},{FAKE_MODEL}", f"r={server.base_url},{FAKE_MODEL}"]
        )
        again = judge_run(
            store_dir, [f"q={server.base_url},{FAKE_MODEL}", f"r={server.base_url},{FAKE_MODEL}"]
        )
    assert summary["episodes"] == 2 and summary["skipped_unscored"] == 1 and summary["decided_by_checks"] == 1
    assert summary["judges"]["q"]["verdicts"] == 1 and summary["judges"]["r"]["success"] == 1
    assert len(server.requests) == 2  # the toggle episode, once per judge; the rerun hit the cache
    assert again["cache"]["hits"] == 2
    store = RunStore(store_dir, create=False)
    toggle = store.verdicts(ids[0])
    assert sorted(v.name for v in toggle) == ["q", "r"]  # re-judging replaced, not duplicated
    price = store.verdicts(ids[1])
    assert [(v.source, v.success) for v in price] == [(VerdictSource.CHECKS, True)]
    assert store.verdicts(ids[2]) == []
    store.close()
    assert json.loads((store_dir / "judge_summary.json").read_text())["episodes"] == 2

    from typer.testing import CliRunner

    from realbench.cli import app

    with FakeModelServer([OK], repeat_last=True) as server:
        result = CliRunner().invoke(
            app,
            [
                "judge",
                str(store_dir),
                "--judge",
                f"q={server.base_url},{FAKE_MODEL}",
                "--price-in",
                "1.0",
                "--json",
            ],
        )
        bad = CliRunner().invoke(app, ["judge", str(store_dir), "--judge", "no-url-here"])
    assert result.exit_code == 0, result.output
    assert '"decided_by_checks": 1' in result.output and server.requests == []  # all cached
    assert isinstance(bad.exception, ConfigError)


def test_boundary_checks_read_the_screen_the_agent_acted_on():
    """On a clone the boundary tap is delivered: the final screen is the one after it."""
    base = _traj("book", end=EndReason.BOUNDARY, final_xml=_xml("订单已提交"))
    steps = list(base.steps)
    steps[-1] = steps[-1].model_copy(
        update={"boundary": "tap: '提交订单'", "hierarchy": _xml("南京", "提交订单")}
    )
    traj = base.model_copy(update={"steps": steps})
    v = deterministic_verdict(PACK.task("book"), traj)
    assert v is not None and v.success, v
    assert not deterministic_verdict(
        PACK.task("book"), base
    ).success  # without the boundary screen: final screen


def test_judges_can_be_asked_about_decided_episodes_too():
    with FakeModelServer([OK], repeat_last=True) as server:
        judge = _judge(server)
        traj = _traj("price", end=EndReason.ANSWER, answer="600元")
        verdicts = judge_trajectory(
            PACK.task("price"), traj, [judge], expected_answer="553.5", judge_decided=True
        )
        aborted = _traj(end=EndReason.ABORT, outcome=Outcome.ENV_INVALID)
        skipped = judge_trajectory(PACK.task("toggle"), aborted, [judge], judge_decided=True)
        judge.close()
    assert [(v.source, v.success) for v in verdicts] == [
        (VerdictSource.CHECKS, False),
        (VerdictSource.JUDGE, True),
    ]
    assert len(skipped) == 1 and skipped[0].abstained and len(server.requests) == 1


def test_requests_carry_the_verdict_schema_reason_first():
    rules = RequestRules(require_response_format=True)
    with FakeModelServer([OK], rules=rules) as server:
        judge = _judge(server)
        v = judge.judge(PACK.task("toggle"), _traj())
        judge.close()
    assert server.problems == [] and v.success
    fmt = server.requests[0].body["response_format"]
    schema = fmt["json_schema"]["schema"]
    assert fmt["type"] == "json_schema" and list(schema["properties"])[:2] == ["reason", "success"]


def test_endpoint_without_structured_output_falls_back_to_free_form():
    rules = RequestRules(response_format=False)
    with FakeModelServer([OK, OK], rules=rules) as server:
        judge = _judge(server)
        first = judge.judge(PACK.task("toggle"), _traj())
        second = judge.judge(PACK.task("toggle"), _traj(steps=4))
        judge.close()
    assert first.success and second.success
    # refused once with the schema, then asked without it (and not with it again)
    with_schema = ["response_format" in r.body for r in server.requests]
    assert with_schema == [True, False, False]
    assert "not supported" in server.problems[0]


def test_fake_refuses_a_malformed_schema():
    from realbench.agents.client import ChatClient
    from realbench.errors import ModelError

    with FakeModelServer([OK]) as server:
        endpoint = ChatEndpoint(base_url=server.base_url, model=FAKE_MODEL, max_retries=0)
        with ChatClient(endpoint) as client, pytest.raises(ModelError, match="needs a name"):
            client.complete(
                [{"role": "user", "content": "hi"}],
                response_format={"type": "json_schema", "json_schema": {"schema": {"type": "object"}}},
            )


def test_each_tap_is_drawn_and_named_by_the_element_it_hit():
    traj = _traj(steps=3)
    # rows of 90 px on a 1080x2400 screen; the tap at y=45/1000 (108 px) hits the second row
    rows = _xml("设置", "消息通知", "关于").replace(
        '<hierarchy rotation="0">', '<hierarchy rotation="0"><node bounds="[0,0][1080,2400]">'
    )
    rows = rows.replace("</hierarchy>", "</node></hierarchy>")
    first = traj.steps[0].model_copy(
        update={"hierarchy": rows, "action": {"type": "click", "x": 500, "y": 45}}
    )
    traj = traj.model_copy(update={"steps": [first, *traj.steps[1:]]})
    with FakeModelServer([OK]) as server:
        judge = _judge(server, images=4)
        judge.judge(PACK.task("toggle"), traj)
        judge.close()
    req = server.requests[0]
    assert '1. {"type": "click", "x": 500, "y": 45} — hit "消息通知"' in req.text()
    assert "step 1's touch drawn in red" in req.text()
    # the picture sent is not the stored one: the ring is on it, in red, around the point
    from realbench.agents.images import decode_data_url

    first_image = next(p for p in req.messages[1]["content"] if p.get("type") == "image_url")["image_url"][
        "url"
    ]
    _, data = decode_data_url(first_image)
    with Image.open(io.BytesIO(data)) as img:
        rgb = img.convert("RGB")
        w, h = rgb.size
        reds = [
            (x, y)
            for x in range(w)
            for y in range(h)
            if rgb.getpixel((x, y))[0] > 200 and rgb.getpixel((x, y))[1] < 100
        ]
    assert reds, "no red mark on the screenshot"
    cx, cy = sum(x for x, _ in reds) / len(reds), sum(y for _, y in reds) / len(reds)
    assert abs(cx - 0.5 * (w - 1)) < w * 0.1 and abs(cy - 0.045 * (h - 1)) < h * 0.1


def test_cache_key_follows_the_rendered_request(tmp_path):
    cache = JudgeCache(tmp_path / "judge_cache")
    with FakeModelServer([OK], repeat_last=True) as server:
        judge = _judge(server, cache=cache)
        task = PACK.task("toggle")
        judge.judge(task, _traj())
        judge.judge(task, _traj())
        assert len(server.requests) == 1
        edited = task.model_copy(
            update={"judge": task.judge.model_copy(update={"rubric": "Stricter rubric."})}
        )
        judge.judge(edited, _traj())  # same trajectory, edited rubric: a new request, asked anew
        assert len(server.requests) == 2
        judge.close()
