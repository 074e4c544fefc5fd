"""`realbench parse-action` through the real CLI."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from realbench.cli import app

runner = CliRunner()


def test_ui_tars_type_with_newline_prints_type_then_enter():
    out = runner.invoke(
        app,
        [
            "parse-action",
            "--format",
            "ui-tars",
            "--image-size",
            "868x1932",
            "Action: type(content='北京\\n')",
        ],
    )
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["actions"] == [{"type": "type", "text": "北京"}, {"type": "key", "key": "enter"}]


def test_pixel_point_uses_the_given_image_size():
    text = '<tool_call>{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [433, 965]}}</tool_call>'
    out = runner.invoke(app, ["parse-action", "--format", "qwen-mobile", "--image-size", "867x1931", text])
    assert json.loads(out.output)["actions"] == [{"type": "click", "x": 500, "y": 500}]


def test_format_error_is_printed_with_a_failing_exit_code():
    out = runner.invoke(app, ["parse-action", "--format", "qwen3-mobile", "I think I should tap the button."])
    assert out.exit_code == 1
    data = json.loads(out.output)
    assert data["ok"] is False and data["error"]


def test_bad_image_size_is_a_config_error():
    out = runner.invoke(app, ["parse-action", "--image-size", "wide", "x"])
    assert out.exit_code != 0
