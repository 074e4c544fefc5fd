"""Phone identity of a virtual phone from a device profile (devices/profiles/<name>.yaml)."""

from __future__ import annotations

from devices.profile import load_profile, profile_names
from devices.virtual.model import PhoneIdentity

DEFAULT_PROFILE = "generic-1080x2400"


def load_profile_identity(name: str = DEFAULT_PROFILE) -> PhoneIdentity:
    """Screen, density, ROM and IME from the profile; names say it is a virtual phone of that kind."""
    profile = load_profile(name)
    return PhoneIdentity(
        profile=profile.name,
        rom=profile.rom,
        ime=profile.ime,
        width=profile.screen.width,
        height=profile.screen.height,
        density=profile.screen.density_dpi,
        model=f"Virtual {profile.name}",
        product_name=f"vphone_{profile.name}".replace("-", "_"),
    )


def default_identity() -> PhoneIdentity:
    if DEFAULT_PROFILE in profile_names():
        return load_profile_identity(DEFAULT_PROFILE)
    return PhoneIdentity()
