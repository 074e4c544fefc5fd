"""Playwright's driver keeps what Node compiled of it on disk.

The driver is a Node program that compiles its JavaScript every time it starts: about 0.45 s of
CPU per start on a 2-core Xeon, once per `BrowserPool`, so once per RL worker and per evaluation
browser. Node (22.1 and later; Playwright bundles its own) reuses compiled code from the folder
`NODE_COMPILE_CACHE` names, checks each entry against the source's hash and its own checksum, and
compiles afresh what it cannot use. With the folder: 0.32-0.35 s (docs/benchmarks.md).

The driver inherits this process's environment, so the variable is set here, before the driver
starts, unless the user set it or switched Node's cache off (`NODE_DISABLE_COMPILE_CACHE`).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

log = logging.getLogger(__name__)

CACHE_VAR = "NODE_COMPILE_CACHE"
DISABLE_VAR = "NODE_DISABLE_COMPILE_CACHE"


def cache_folder() -> Path:
    """`$XDG_CACHE_HOME/realbench/node-compile-cache`, else under `~/.cache`."""
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base else Path.home() / ".cache") / "realbench" / "node-compile-cache"


def use_node_compile_cache() -> Path | None:
    """Name the cache folder for the drivers this process starts; the folder in use, or None when
    the user chose otherwise or no folder can be written (Node then compiles as before)."""
    if os.environ.get(DISABLE_VAR):
        return None
    if os.environ.get(CACHE_VAR):
        return Path(os.environ[CACHE_VAR])
    folder = cache_folder()
    if not folder.is_absolute():  # no home to be found: "~" would be a folder of the working one
        log.debug("no compile cache for Playwright's driver: no cache home (%s)", folder)
        return None
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        log.debug("no compile cache for Playwright's driver: %s", exc)
        return None
    if not os.access(folder, os.W_OK | os.X_OK):
        log.debug("no compile cache for Playwright's driver: %s is not writable", folder)
        return None
    os.environ[CACHE_VAR] = str(folder)
    return folder
