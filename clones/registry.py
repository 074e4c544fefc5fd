"""Registers the built-in clones. Each clone package calls `clones.base.register` on import."""

from __future__ import annotations

import importlib
import logging

log = logging.getLogger(__name__)

BUILTIN = ("clones.train_ticketing", "clones.bank", "clones.toy")

for _module in BUILTIN:
    try:
        importlib.import_module(_module)
    except ModuleNotFoundError as exc:
        if exc.name != _module:
            raise
        log.debug("clone module %s is not present", _module)
