"""Print a rich table at its full width when the output is not a terminal.

Rich falls back to 80 columns when stdout is a pipe or a file, and cuts key columns (phone serials,
judge and model names) with an ellipsis. A script reading the table needs every character; a
terminal keeps its own width.
"""

from __future__ import annotations

from rich.console import Console, RenderableType

WIDEST = 100_000


def print_full_width(console: Console, renderable: RenderableType) -> None:
    if console.is_terminal:
        console.print(renderable)
        return
    natural = console.measure(renderable, options=console.options.update_width(WIDEST)).maximum
    if natural <= console.width:
        console.print(renderable)
        return
    # Console.print(width=…) only narrows; a one-off console on the same file widens.
    Console(file=console.file, width=natural, color_system=None, highlight=False).print(renderable)
