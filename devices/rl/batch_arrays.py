"""Batched screenshots stacked into arrays that were returned before and that nobody holds any more.

A vector environment's batch of screenshots is large (100 at 448x995 are 134 MB), and a fresh one
each step costs its page faults. numpy advises the kernel to back arrays that large with transparent
huge pages. On the two-core virtual machine of docs/benchmarks.md, faulting in 134 MB of fresh huge
pages after a few idle seconds took 0.6-1.3 s of CPU (0.03 s when they had just been freed;
ordinary pages 0.05-0.08 s every time), likely because the host takes back a guest's free huge
pages. That CPU was taken from the browsers, and the first reset's observations came late by as
much. Here a batch goes into an array this environment made before once the caller has dropped
every reference to it (the array, a view of it, a buffer over it), and a new array is allocated in
ordinary pages.
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Callable

import numpy as np


def _references(arrays: list[np.ndarray], index: int) -> int:
    return sys.getrefcount(arrays[index])


# What `_references` counts for an array that only its list holds, measured on this interpreter
# through the same call (interpreters differ in the references they take for a call's arguments).
_ALONE = _references([np.empty(0)], 0)


def _hugepage_switch() -> Callable[[bool], bool] | None:
    """numpy's switch for its huge-page advice (private; numpy 1.x and 2.x name its module apart)."""
    for module in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            return getattr(importlib.import_module(module), "_set_madvise_hugepage", None)
        except ImportError:
            continue
    return None


_SWITCH = _hugepage_switch()
_SWITCH_LOCK = threading.Lock()


def fresh_array(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A new array in ordinary pages: numpy's huge-page advice is off while it is allocated (the
    switch is the process's; another thread's large array in that moment goes without the advice,
    which costs it nothing but speed). The array owns its memory, so that every view of it refers
    to it and counts as holding it."""
    if _SWITCH is None:
        return np.empty(shape, dtype)
    with _SWITCH_LOCK:
        before = _SWITCH(False)
        try:
            return np.empty(shape, dtype)
        finally:
            _SWITCH(before)


class BatchArrays:
    """Stacks per-environment arrays into one of the last `keep` batches returned, when no one else
    holds it, else into a fresh one. `keep` of 3: a loop that holds the previous step's observations
    while it steps (``obs, ... = env.step(policy(obs))``) frees every other batch."""

    def __init__(self, keep: int = 3) -> None:
        self.keep = keep
        self._arrays: list[np.ndarray] = []
        self.reused = 0
        self.made = 0

    def stack(self, values: list[np.ndarray]) -> np.ndarray:
        first = values[0]
        shape = (len(values), *first.shape)
        for index in range(len(self._arrays)):
            if _references(self._arrays, index) > _ALONE:
                continue  # someone holds it, or a view of it, or a buffer over it
            array = self._arrays[index]
            if array.shape == shape and array.dtype == first.dtype:
                self.reused += 1
                return np.stack(values, out=array)
        out = fresh_array(shape, first.dtype)
        self.made += 1
        self._arrays.append(out)
        if len(self._arrays) > self.keep:
            self._arrays.pop(0)
        return np.stack(values, out=out)
