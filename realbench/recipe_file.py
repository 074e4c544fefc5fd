"""Writing one task's recipe into a pack's `real.yaml` without touching the rest of the file.

The file is hand-maintained (comments, quoting, key order), thousands of lines long and edited by
several people: a recorder that re-dumps it turns a one-task change into a diff of the whole file.
Here the file is composed (libyaml) only to find where the task's entry lies; that entry's lines
are read round-trip (ruamel.yaml, keeping their comments and quoting), updated, and dumped back in
the file's own block style; every other line (comments between tasks included) is kept byte for
byte. The result must parse back to
the old document with only that task changed, or nothing is written.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import yaml

from realbench.errors import ConfigError
from realbench.safe_yaml import load_yaml_text, read_yaml_file

_FAST: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

RECIPE_WIDTH = 4096  # never wrap a long line: a wrapped line is a changed line
MAPPING_INDENT = 2


def _yaml() -> Any:
    from ruamel.yaml import YAML

    rt = YAML(typ="rt")
    rt.preserve_quotes = True
    rt.width = RECIPE_WIDTH
    rt.indent(
        mapping=MAPPING_INDENT, sequence=MAPPING_INDENT, offset=0
    )  # the style of the packs' real.yaml files
    return rt


def _dump(rt: Any, data: Any) -> list[str]:
    buf = io.StringIO()
    rt.dump(data, buf)
    return buf.getvalue().splitlines(keepends=True)


def _is_filler(line: str) -> bool:
    stripped = line.strip()
    return not stripped or stripped.startswith("#")


def _split_trailing_filler(lines: list[str]) -> tuple[list[str], list[str]]:
    """(lines, the blank and comment lines at their end): comments there introduce what follows."""
    cut = len(lines)
    while cut > 1 and _is_filler(lines[cut - 1]):
        cut -= 1
    return lines[:cut], lines[cut:]


def _key_lines(mapping: Any) -> dict[str, tuple[int, int]]:
    """(line, column), 0-based, of each scalar key of a composed mapping node."""
    return {
        str(k.value): (k.start_mark.line, k.start_mark.column)
        for k, _ in mapping.value
        if isinstance(k, yaml.ScalarNode)
    }


def spliced_recipe_text(text: str, task_id: str, recipe: dict[str, Any], *, app: str) -> str:
    """`text` (a real.yaml) with task `task_id`'s entry updated by `recipe`'s keys, every other line
    unchanged. A file without a `tasks` mapping gets one appended.

    Where the entries lie comes from libyaml's composer (fast, with line marks); only the task's
    own lines go through ruamel's round trip (pure Python: seconds for a whole pack's file)."""
    from ruamel.yaml.comments import CommentedMap

    rt = _yaml()
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    root = yaml.compose(text, Loader=_FAST) if text.strip() else None
    if root is None:
        new = CommentedMap([("app", app), ("tasks", CommentedMap([(task_id, dict(recipe))]))])
        return "".join(lines) + "".join(_dump(rt, new))
    if not isinstance(root, yaml.MappingNode):
        raise ConfigError("the recipes file is not a YAML mapping", hint="it holds `app:` and `tasks:`")
    tasks_node = next(
        (v for k, v in root.value if isinstance(k, yaml.ScalarNode) and k.value == "tasks"), None
    )
    if not isinstance(tasks_node, yaml.MappingNode) or not tasks_node.value or tasks_node.flow_style:
        # No block of task entries to keep in place: write the mapping out after the rest.
        rest = [line for line in lines if not line.startswith("tasks:")]
        return "".join(rest) + "".join(_dump(rt, {"tasks": {task_id: dict(recipe)}}))
    top = _key_lines(root)
    tasks_line = top["tasks"][0]
    tasks_end = next((n for n, _ in sorted(top.values()) if n > tasks_line), len(lines))
    keys = _key_lines(tasks_node)
    key_lines = sorted(n for n, _ in keys.values())
    col = min(c for _, c in keys.values())
    if task_id in keys:
        start, col = keys[task_id]
        end = next((n for n in key_lines if n > start), tasks_end)
        own, trailing = _split_trailing_filler(lines[start:end])
        # The entry alone, round trip: its comments and quoting survive the update.
        parsed = rt.load("tasks:\n" + "".join(own))
        entry = parsed["tasks"][task_id]
        if not isinstance(entry, CommentedMap):
            entry = CommentedMap()
        for key, value in recipe.items():
            entry[key] = value
    else:
        # Insert after the last task's own lines, before comments that introduce what follows.
        body, _ = _split_trailing_filler(lines[key_lines[-1] : tasks_end])
        start = end = key_lines[-1] + len(body)
        trailing = []
        entry = CommentedMap(recipe)
    # Dumped under a `tasks:` key, as in the file, so comment columns stay where they were.
    fresh, _ = _split_trailing_filler(
        _dump(rt, CommentedMap([("tasks", CommentedMap([(task_id, entry)]))]))[1:]
    )
    shift = col - MAPPING_INDENT
    fresh = [(" " * shift + line) if shift > 0 and line.strip() else line for line in fresh]
    return "".join(lines[:start] + fresh + trailing + lines[end:])


def write_task_recipe(path: Path, task_id: str, recipe: dict[str, Any], *, app: str) -> None:
    """Update task `task_id`'s entry of the recipes file `path` (created when missing), changing
    only that entry's lines; atomic (a temporary file renamed over it)."""
    text = read_yaml_file(path, what="recipes") if path.exists() else ""
    before = load_yaml_text(text) if text.strip() else None
    new_text = spliced_recipe_text(text, task_id, recipe, app=app)
    expected: dict[str, Any] = dict(before) if isinstance(before, dict) else {"app": app}
    tasks = dict(expected.get("tasks") or {})
    entry = dict(tasks.get(task_id) or {})
    entry.update(load_yaml_text(_plain_dump(recipe)))
    tasks[task_id] = entry
    expected["tasks"] = tasks
    if load_yaml_text(new_text) != expected:
        raise ConfigError(
            f"could not write the recipe of {task_id} into {path} without changing other entries",
            hint="edit the file by hand, or write the recording to a new recipes file",
        )
    tmp = path.with_name(f".{path.name}.new")
    tmp.write_text(new_text, encoding="utf-8")
    os.replace(tmp, path)


def _plain_dump(data: Any) -> str:
    import yaml

    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False)
