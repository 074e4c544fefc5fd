"""The device farm: leased phones, health checks, quarantine, the safety interlock and schedulers."""

from devices.farm.rig_targets import FarmTarget, farm_pool, targets_from_rig

__all__ = ["FarmTarget", "farm_pool", "targets_from_rig"]
