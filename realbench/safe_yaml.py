"""YAML for files users hand us (packs, rigs): no aliases, a node budget and a size cap.

`yaml.safe_load` is safe from code execution but not from an alias bomb (a few lines expanding
to billions of nodes) or a huge file; either wedges the process. Aliases are refused outright
(realbench's own files never use them), and the file's size and node count are capped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from realbench.errors import ConfigError

MAX_YAML_BYTES = 8 * 1024 * 1024
MAX_YAML_NODES = 500_000


class YamlRefused(ConfigError):
    """A YAML file realbench will not read (aliases, too big, too many nodes, not text)."""


def _loader(max_nodes: int) -> type[yaml.SafeLoader]:
    class Loader(yaml.SafeLoader):
        nodes = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                line = event.start_mark.line + 1 if event.start_mark else "?"
                raise YamlRefused(
                    f"line {line}: YAML aliases (*{event.anchor}) are not allowed",
                    hint="write the value out where it is used",
                )
            Loader.nodes += 1
            if Loader.nodes > max_nodes:
                raise YamlRefused(f"more than {max_nodes} YAML nodes", hint="split the file")
            return super().compose_node(parent, index)

    return Loader


def load_yaml_text(text: str, *, max_nodes: int = MAX_YAML_NODES) -> Any:
    """Parse YAML text with aliases refused and at most `max_nodes` nodes (yaml.YAMLError on bad syntax)."""
    return yaml.load(text, Loader=_loader(max_nodes))  # noqa: S506 - a SafeLoader subclass


def read_yaml_file(path: Path, *, what: str, max_bytes: int = MAX_YAML_BYTES) -> str:
    """The text of a user's YAML file, or a one-line ConfigError (folder, too big, not UTF-8)."""
    if path.is_dir():
        raise YamlRefused(f"{path} is a folder, not a {what} file", hint=f"pass the {what} YAML file")
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise ConfigError(f"no {what} file at {path}") from None
    if size > max_bytes:
        raise YamlRefused(
            f"{path} is {size / 1e6:.1f} MB; a {what} file may be at most {max_bytes / 1e6:.0f} MB",
            hint="split it, or check that this is the file you meant",
        )
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise YamlRefused(f"{path} is not UTF-8 text (byte {exc.start})", hint="save it as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
