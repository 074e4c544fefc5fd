"""Prompt/action formats: a prompt builder and a parser per model family.

Names: ``qwen-mobile`` (Qwen2.5-VL mobile_use, pixel coordinates), ``qwen3-mobile`` (Qwen3-VL's
mobile_use on its 999x999 grid; ``qwen3-mobile-tools`` sends the tool in the API's ``tools`` field,
a mode Qwen2.5-VL's chat template cannot render, so ``qwen-mobile-tools`` is refused), ``ui-tars`` (UI-TARS-1.5 text actions, pixel coordinates), ``ui-tars-norm``
(UI-TARS 1.0, 0–1000) and ``json`` (realbench Action JSON, 0–1000).
"""

from __future__ import annotations

from collections.abc import Callable

from realbench.agents.formats.base import ActionFormat, CoordSpace, FormatError, ParsedOutput
from realbench.agents.formats.json_format import JsonFormat
from realbench.agents.formats.qwen_mobile import ModelFamily, QwenMobileFormat, ToolMode
from realbench.agents.formats.ui_tars import UITarsFormat
from realbench.errors import UnknownNameError

_FORMATS: dict[str, Callable[[], ActionFormat]] = {
    "qwen-mobile": lambda: QwenMobileFormat(family=ModelFamily.QWEN25),
    "qwen3-mobile": lambda: QwenMobileFormat(family=ModelFamily.QWEN3),
    "qwen3-mobile-tools": lambda: QwenMobileFormat(family=ModelFamily.QWEN3, tool_mode=ToolMode.API),
    "ui-tars": lambda: UITarsFormat(coords=CoordSpace.PIXELS),
    "ui-tars-norm": lambda: UITarsFormat(coords=CoordSpace.NORM_1000),
    "json": JsonFormat,
}


def format_names() -> list[str]:
    return sorted(_FORMATS)


def get_format(name: str) -> ActionFormat:
    if name == "qwen-mobile-tools":
        # refused with the reason (Qwen2.5-VL's chat template has no tools section)
        return QwenMobileFormat(family=ModelFamily.QWEN25, tool_mode=ToolMode.API)
    try:
        return _FORMATS[name]()
    except KeyError:
        raise UnknownNameError("format", name, list(_FORMATS)) from None


__all__ = [
    "ActionFormat",
    "CoordSpace",
    "FormatError",
    "JsonFormat",
    "ModelFamily",
    "ParsedOutput",
    "QwenMobileFormat",
    "ToolMode",
    "UITarsFormat",
    "format_names",
    "get_format",
]
