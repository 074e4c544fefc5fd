"""The device farm: leased phones, health checks, quarantine, the safety interlock and schedulers."""

from __future__ import annotations

from typing import Any

__all__ = ["FarmTarget", "farm_pool", "targets_from_rig"]


def __getattr__(name: str) -> Any:
    # Imported on first use: `devices.phone_target` needs `devices.farm.health` and `rig_targets`
    # needs `devices.phone_target`, so importing rig_targets with the package made
    # `import devices.phone_target` (before anything else) a circular import.
    if name in __all__:
        from devices.farm import rig_targets

        return getattr(rig_targets, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
