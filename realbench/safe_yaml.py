"""YAML for files users hand us (packs, rigs): an expansion budget and a size cap.

`yaml.safe_load` is safe from code execution but not from an alias bomb (a few lines whose
aliases expand to billions of nodes) or a huge file; either wedges the process. Aliases are
allowed (PyYAML's own dumper writes them for shared values), but the document's size *with every
alias expanded* is counted on the composed node graph before anything is constructed, and a
document over the budget is refused; the file's size is capped too.

A key given twice in one mapping is an error, not "the last one wins": a second
`money_moving: false` further down a pack must not quietly switch a safety rule off.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from realbench.errors import ConfigError

MAX_YAML_BYTES = 8 * 1024 * 1024
MAX_YAML_NODES = 500_000


# libyaml's parser where PyYAML was built with it: the same safe constructor and node graph,
# several times faster on the large packs every run and certify loads.
_SafeLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class YamlRefused(ConfigError):
    """A YAML file realbench will not read (alias bomb, too big, too many nodes, not text)."""


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def expanded_size(root: yaml.Node, max_nodes: int) -> int:
    """Nodes in the document with every alias expanded; YamlRefused past `max_nodes` or on a cycle.
    Memoised per node, so a bomb is measured in time linear in its (small) text."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if key in sizes:
            continue
        kids = _children(node)
        if not children_done:
            if key in open_nodes:
                raise YamlRefused("the YAML refers to itself through aliases (a cycle)")
            open_nodes.add(key)
            stack.append((node, True))
            for kid in kids:
                if id(kid) in open_nodes and id(kid) not in sizes:
                    raise YamlRefused("the YAML refers to itself through aliases (a cycle)")
                stack.append((kid, False))
            continue
        size = 1 + sum(sizes[id(kid)] for kid in kids)
        if size > max_nodes:
            line = node.start_mark.line + 1 if node.start_mark else "?"
            raise YamlRefused(
                f"line {line}: the YAML expands to more than {max_nodes} nodes through its aliases "
                "(an alias bomb?)",
                hint="write the values out, or split the file",
            )
        sizes[key] = size
        open_nodes.discard(key)
    return sizes[id(root)]


MERGE_TAG = "tag:yaml.org,2002:merge"
BOOL_TAG = "tag:yaml.org,2002:bool"
NULL_TAG = "tag:yaml.org,2002:null"


def _key_identity(key: yaml.ScalarNode) -> tuple[str, str]:
    """What a key constructs to, as far as telling two keys apart needs (`true` and `True` are one)."""
    if key.tag in (BOOL_TAG, NULL_TAG):
        return key.tag, {"yes": "true", "on": "true", "no": "false", "off": "false", "~": "", "null": ""}.get(
            key.value.lower(), key.value.lower()
        )
    return key.tag, key.value


def refuse_duplicate_keys(root: yaml.Node) -> None:
    """YamlRefused naming the first mapping key given twice (each node visited once, no recursion).
    Keys a merge (`<<: *base`) brings in may be overridden; keys written out may not repeat."""
    seen: set[int] = set()
    stack: list[yaml.Node] = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            first_line: dict[tuple[str, str], int] = {}
            for key, _ in node.value:
                if not isinstance(key, yaml.ScalarNode) or key.tag == MERGE_TAG:
                    continue
                line = key.start_mark.line + 1 if key.start_mark else 0
                same = _key_identity(key)
                if same in first_line:
                    raise YamlRefused(
                        f"line {line}: key {key.value!r} is given twice in one mapping "
                        f"(first on line {first_line[same]})",
                        hint="keep one of them: YAML would silently use the last",
                    )
                first_line[same] = line
        stack.extend(_children(node))


def load_yaml_text(text: str, *, max_nodes: int = MAX_YAML_NODES) -> Any:
    """Parse YAML text whose alias-expanded size is at most `max_nodes` and whose mappings repeat
    no key (YamlRefused), or raise yaml.YAMLError on bad syntax."""
    loader = _SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        expanded_size(node, max_nodes)
        refuse_duplicate_keys(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


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
