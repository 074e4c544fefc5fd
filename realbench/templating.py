"""``{name}`` placeholders in instructions, selectors, plans and verifier arguments."""

from __future__ import annotations

import re
from typing import Any

from realbench.errors import ConfigError

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.]*)\}")


def placeholders(template: str) -> set[str]:
    return {m.group(1) for m in _PLACEHOLDER.finditer(template)}


def _lookup(params: dict[str, Any], dotted: str) -> Any:
    value: Any = params
    for part in dotted.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        else:
            raise ConfigError(
                f"template placeholder {{{dotted}}} has no value", hint=f"known: {', '.join(sorted(params))}"
            )
    return value


def render(template: str, params: dict[str, Any]) -> str:
    """Replace ``{name}`` (or ``{name.sub}``) with the parameter's value; ``{{`` escapes."""
    if "{" not in template:
        return template
    escaped = template.replace("{{", "\x00").replace("}}", "\x01")
    out = _PLACEHOLDER.sub(lambda m: str(_lookup(params, m.group(1))), escaped)
    return out.replace("\x00", "{").replace("\x01", "}")


def render_value(value: Any, params: dict[str, Any]) -> Any:
    """Render every string inside a nested structure; a string that is exactly one placeholder keeps the value's type."""
    if isinstance(value, str):
        m = _PLACEHOLDER.fullmatch(value)
        if m:
            return _lookup(params, m.group(1))
        return render(value, params)
    if isinstance(value, list):
        return [render_value(v, params) for v in value]
    if isinstance(value, dict):
        return {k: render_value(v, params) for k, v in value.items()}
    return value
