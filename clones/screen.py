"""The clone's screen as the page shows it, drift aside: the clone's own rendering, the framework's
generic dialog and toast. The server serves it inside ``#app``; the browser-free plan runner parses
the same markup, so both see one screen."""

from __future__ import annotations

import html
from typing import Any

from clones.base import Clone, State

SCREEN_OPEN = '<main class="rb-screen">'
SCREEN_CLOSE = "</main>"


def _dialog(dialog: Any) -> str:
    """The framework's generic dialog, for ``ui.dialog = {title, message, buttons: [{label, ev, arg}]}``.
    A clone that draws its own dialogs stores anything else there and renders it itself."""
    if not isinstance(dialog, dict) or not isinstance(dialog.get("buttons"), list):
        return ""
    buttons = []
    for b in dialog["buttons"]:
        if not isinstance(b, dict):
            continue
        arg = f' data-arg="{html.escape(str(b["arg"]))}"' if b.get("arg") is not None else ""
        buttons.append(
            f'<button class="btn dialog-btn" data-ev="{html.escape(str(b.get("ev", "__back__")))}"{arg}>'
            f"{html.escape(str(b.get('label', '')))}</button>"
        )
    return (
        '<div class="modal"><div class="dialog" role="dialog">'
        f'<div class="dialog-title">{html.escape(str(dialog.get("title", "")))}</div>'
        f'<div class="dialog-body">{html.escape(str(dialog.get("message", "")))}</div>'
        f'<div class="dialog-actions">{"".join(buttons)}</div></div></div>'
    )


def screen_html(clone: Clone, state: State) -> str:
    """The clone's screen plus the generic dialog and toast (a toast only where the clone drew none)."""
    ui = state.get("ui") or {}
    app_html = clone.render(state) + _dialog(ui.get("dialog"))
    toast = ui.get("toast")
    if toast and html.escape(str(toast)) not in app_html:
        app_html += f'<div class="toast" role="alert">{html.escape(str(toast))}</div>'
    return app_html
