"""Imports of upstream packages used as test oracles.

qwen-vl-utils imports torchvision at module level for its video readers; its smart_resize uses
only `math`. PyPI's torchvision wheels are built against CUDA torch and cannot load beside the
CPU torch build, so when torchvision is absent a stand-in module (empty, only so the import
succeeds) takes its place while qwen-vl-utils loads. The function under comparison is upstream's
own code either way.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from collections.abc import Callable


def qwen_vl_utils_smart_resize() -> Callable[..., tuple[int, int]]:
    if importlib.util.find_spec("torchvision") is None and "torchvision" not in sys.modules:
        stand_in = types.ModuleType("torchvision")
        transforms = types.ModuleType("torchvision.transforms")
        transforms.InterpolationMode = types.SimpleNamespace(BICUBIC="bicubic")  # type: ignore[attr-defined]
        stand_in.io = types.ModuleType("torchvision.io")  # type: ignore[attr-defined]
        stand_in.transforms = transforms  # type: ignore[attr-defined]
        stand_in.__version__ = "0.0-stand-in"  # type: ignore[attr-defined]
        sys.modules.update(
            {"torchvision": stand_in, "torchvision.transforms": transforms, "torchvision.io": stand_in.io}
        )
        try:
            module = importlib.import_module("qwen_vl_utils.vision_process")
        finally:
            for name in ("torchvision", "torchvision.transforms", "torchvision.io"):
                sys.modules.pop(name, None)
    else:
        module = importlib.import_module("qwen_vl_utils.vision_process")
    return module.smart_resize
