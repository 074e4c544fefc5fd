"""Commands that look at one phone of a virtual rig (`capture`, `devices`) need phones that outlive them.

A run starts a virtual rig's phones itself and stops them at its end. `capture` and `devices` used to
do the same: they started throwaway phones, reported on them, stopped them, and an error hint then
listed serials that no longer existed. They now use the phones `realbench vphone up` keeps running,
and without them say how to start them.
"""

from __future__ import annotations

from devices.rig import Rig
from realbench.errors import ConfigError


def vphone_up_command(rig: Rig) -> str:
    """The `realbench vphone up` line that starts phones following the rig's virtual section."""
    assert rig.virtual is not None
    v = rig.virtual
    return f"realbench vphone up -n {v.count} --drift {v.drift} --profile {v.profile}"


def running_serials(rig: Rig) -> list[str]:
    """Serials of the `vphone up` phones that follow this rig (drift, profile, app versions)."""
    from devices.farm.rig_targets import mismatch_with_rig, running_virtual_phones

    return [serial for serial, url in running_virtual_phones() if not mismatch_with_rig(url, rig)]


def require_vphone_up(rig: Rig, *, command: str, serial: str | None = None) -> list[str]:
    """The running phones of a virtual rig, or a ConfigError that says to run `vphone up` (and,
    with `serial`, that it must be one of them). Rigs of real phones pass unchecked."""
    if not rig.is_virtual or rig.virtual is None:
        return []
    up = running_serials(rig)
    start = vphone_up_command(rig)
    if not up:
        raise ConfigError(
            f"rig {rig.name!r} has virtual phones, and none is running: `{command}` needs phones that "
            "`realbench vphone up` keeps running (a run starts its own and stops them when it ends)",
            hint=f"start them with `{start}`; `realbench vphone ls` then lists their serials",
        )
    if serial is not None and serial not in up:
        raise ConfigError(
            f"phone {serial} is not one of the running virtual phones of rig {rig.name!r}",
            hint=f"running: {', '.join(up)} (`realbench vphone ls`); or start more with `{start}`",
        )
    return up
