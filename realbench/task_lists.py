"""Reading a `--tasks @FILE` task list, with one clear error for every way it can be wrong."""

from __future__ import annotations

import json
from pathlib import Path

from realbench.errors import ConfigError

HINT = 'write a JSON list of task ids (["a", "b"]) or an object {"tasks": [{"task": "a"}, …]} as `realbench select` does'


def read_task_list(path: Path) -> list[str]:
    """Task ids from a JSON list, or from an object with a `tasks` list of ids or {task: id} entries."""
    if not path.exists():
        raise ConfigError(f"task list {path} does not exist", hint=HINT)
    if path.is_dir():
        raise ConfigError(f"task list {path} is a folder, not a file", hint=HINT)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"task list {path} is not UTF-8 text", hint=HINT) from None
    except ValueError as exc:
        raise ConfigError(f"task list {path} is not valid JSON ({exc})", hint=HINT) from None
    if isinstance(data, dict):
        data = data.get("tasks")
    if not isinstance(data, list):
        raise ConfigError(f"task list {path} holds no list of tasks", hint=HINT)
    ids = []
    for i, entry in enumerate(data):
        if isinstance(entry, dict):
            task = entry.get("task")
            if not isinstance(task, str) or not task:
                raise ConfigError(f"task list {path}: entry {i} has no 'task' id", hint=HINT)
            ids.append(task)
        elif isinstance(entry, str) and entry:
            ids.append(entry)
        else:
            raise ConfigError(
                f"task list {path}: entry {i} ({str(entry)[:40]!r}) is not a task id", hint=HINT
            )
    return ids
