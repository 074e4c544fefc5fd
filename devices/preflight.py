"""What a phone run checks before its first episode, each failure one clear `PreflightError` line.

- every phone of the rig that this host drives is listed by `adb devices` as `device` (found in a
  second, instead of a read timeout half a minute into the first episode);
- phones that sit on another host are not driven by the local scheduler (they need `--scheduler ray`);
- the pack's app is installed on every phone at the version the pack and the rig pin.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import socket
from dataclasses import dataclass

from devices.rig import Host, PhoneSpec, Rig
from realbench.errors import DeviceError, PreflightError

log = logging.getLogger(__name__)

ADB_LIST_TIMEOUT_S = 5.0
ADB_CONNECT_TIMEOUT_S = 5.0
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0"})

NOT_LISTED_HINT = "check the cable, USB debugging and the RSA prompt on the phone"
STATE_HINTS = {
    "unauthorized": 'accept the RSA prompt on the phone ("Allow USB debugging"), then rerun',
    "offline": "replug the cable or restart the adb server (`adb kill-server`), then rerun",
    "no permissions": "the host's udev rules do not let this user open the phone (see docs/farm.md)",
}


@dataclass(frozen=True)
class AdbListing:
    """What one adb server lists: serial → state (device, unauthorized, offline…)."""

    states: dict[str, str]


@functools.cache
def _this_host_addresses() -> frozenset[str]:
    names = {socket.gethostname(), socket.getfqdn()}
    addresses = set(LOOPBACK) | names
    for name in names:
        with contextlib.suppress(OSError):
            addresses |= {str(info[4][0]) for info in socket.getaddrinfo(name, None)}
    try:  # the interfaces' own addresses (a rig names hosts by LAN address); psutil is optional
        import psutil

        addresses |= {a.address for nics in psutil.net_if_addrs().values() for a in nics}
    except ImportError:
        log.debug("psutil missing: only loopback and the hostname's addresses count as this host")
    return frozenset(addresses)


def is_this_host(host: Host) -> bool:
    """Whether a rig host is the machine this process runs on (by address or by host name)."""
    return host.address in _this_host_addresses() or host.name == socket.gethostname()


def adb_listing(host: Host) -> AdbListing:
    """`adb devices` of the adb server on `host` (its address and adb_port)."""
    import adbutils

    client = adbutils.AdbClient(host=host.address, port=host.adb_port, socket_timeout=ADB_LIST_TIMEOUT_S)
    try:
        return AdbListing({d.serial: d.state for d in client.list()})
    except (adbutils.AdbError, adbutils.AdbTimeout, OSError) as exc:
        raise PreflightError(
            f"no adb server answers at {host.address}:{host.adb_port} (host {host.name!r}): {exc}",
            hint="start it with `adb start-server` (the rig's hosts list its address and adb_port)",
        ) from None


def _try_connect(host: Host, serial: str) -> str | None:
    """A Wi-Fi / TCP serial (`ip:port`) can be attached now; returns its state afterwards."""
    import adbutils

    client = adbutils.AdbClient(host=host.address, port=host.adb_port, socket_timeout=ADB_LIST_TIMEOUT_S)
    with contextlib.suppress(adbutils.AdbError, adbutils.AdbTimeout, OSError):
        client.connect(serial, timeout=ADB_CONNECT_TIMEOUT_S)
        return {d.serial: d.state for d in client.list()}.get(serial)
    return None


def check_phones_listed(rig: Rig, phones: list[PhoneSpec], *, scheduler: str) -> None:
    """Every physical phone this host will drive is listed by its adb server as `device`;
    phones on another host need the Ray scheduler."""
    physical = [p for p in phones if not p.virtual]
    if not physical:
        return
    remote = [p for p in physical if not is_this_host(rig.host(p.host))]
    if remote and scheduler == "local":
        where = ", ".join(f"{p.serial} (host {p.host!r} at {rig.host(p.host).address})" for p in remote)
        raise PreflightError(
            f"phone(s) {where} are plugged into another host; --scheduler local drives only this host's phones",
            hint="run with --scheduler ray on a Ray cluster that includes that host (docs/farm.md), "
            "or run on that host with a rig of its phones",
        )
    listings: dict[str, AdbListing] = {}
    for phone in physical:
        host = rig.host(phone.host)
        if not is_this_host(host) or (scheduler != "local" and host.address in LOOPBACK):
            # another host's phones (or, under Ray, a host known only by a loopback address, which
            # may be any node): the worker beside them finds them
            continue
        listing = listings.get(host.name) or listings.setdefault(host.name, adb_listing(host))
        state = listing.states.get(phone.serial)
        if state is None and ":" in phone.serial:
            state = _try_connect(host, phone.serial)
        if state == "device":
            continue
        if state is None:
            raise PreflightError(
                f"phone {phone.serial} is not listed by `adb devices` on this host "
                f"(adb server {host.address}:{host.adb_port})",
                hint=NOT_LISTED_HINT,
            )
        raise PreflightError(
            f"phone {phone.serial} is listed by `adb devices` as {state!r}, not 'device'",
            hint=STATE_HINTS.get(state, NOT_LISTED_HINT),
        )


def check_app_versions(phones: dict[str, object], package: str, pins: list[str | None]) -> None:
    """The app under test is installed on every phone at each pinned version (pack's, rig's).

    `phones` maps serial → a connected phone with `app_version(package)`."""
    wanted = sorted({p for p in pins if p})
    for serial, phone in phones.items():
        try:
            installed = phone.app_version(package)  # type: ignore[attr-defined]
        except DeviceError as exc:
            raise PreflightError(
                f"phone {serial}: cannot read the version of {package}: {exc.message}", hint=exc.hint
            ) from None
        if installed is None:
            raise PreflightError(
                f"phone {serial}: {package} is not installed",
                hint=f"install {package}" + (f" {wanted[0]}" if wanted else "") + " on the phone",
            )
        for version in wanted:
            if installed != version:
                raise PreflightError(
                    f"phone {serial}: {package} is {installed}, the run needs {version}",
                    hint="install the pinned version, or update the pin (pack real_app.version / rig apps)",
                )
