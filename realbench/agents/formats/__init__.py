"""Prompt/action formats: a prompt builder and a parser per model family.

Names: ``qwen-mobile`` (Qwen2.5-VL mobile_use, pixel coordinates), ``qwen3-mobile`` (the same tool
on a 0–1000 grid), ``ui-tars`` (UI-TARS-1.5 text actions, pixel coordinates), ``ui-tars-norm``
(UI-TARS 1.0, 0–1000) and ``json`` (realbench Action JSON, 0–1000).
"""

from __future__ import annotations

from collections.abc import Callable

from realbench.agents.formats.base import ActionFormat, CoordSpace, FormatError, ParsedOutput
from realbench.agents.formats.json_format import JsonFormat
from realbench.agents.formats.qwen_mobile import QwenMobileFormat, ToolMode
from realbench.agents.formats.ui_tars import UITarsFormat
from realbench.errors import UnknownNameError

_FORMATS: dict[str, Callable[[], ActionFormat]] = {
    "qwen-mobile": lambda: QwenMobileFormat(coords=CoordSpace.PIXELS),
    "qwen-mobile-tools": lambda: QwenMobileFormat(coords=CoordSpace.PIXELS, tool_mode=ToolMode.API),
    "qwen3-mobile": lambda: QwenMobileFormat(coords=CoordSpace.NORM_1000),
    "ui-tars": lambda: UITarsFormat(coords=CoordSpace.PIXELS),
    "ui-tars-norm": lambda: UITarsFormat(coords=CoordSpace.NORM_1000),
    "json": JsonFormat,
}


def format_names() -> list[str]:
    return sorted(_FORMATS)


def get_format(name: str) -> ActionFormat:
    try:
        return _FORMATS[name]()
    except KeyError:
        raise UnknownNameError("format", name, list(_FORMATS)) from None


__all__ = [
    "ActionFormat",
    "CoordSpace",
    "FormatError",
    "JsonFormat",
    "ParsedOutput",
    "QwenMobileFormat",
    "ToolMode",
    "UITarsFormat",
    "format_names",
    "get_format",
]
