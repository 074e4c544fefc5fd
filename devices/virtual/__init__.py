"""The virtual phone: a fake phone speaking the device side of ADB and the uiautomator2 JSON-RPC.

A test rig, not a phone: everything it produces says device_kind `virtual-phone`. See docs/vphone.md.
"""

from devices.virtual.control import PhoneControl
from devices.virtual.host import PhoneInfo, VirtualPhoneHost
from devices.virtual.model import (
    DEVICE_KIND,
    Faults,
    InputEvent,
    InputKind,
    InputSource,
    PhoneIdentity,
    VirtualPhoneSpec,
)
from devices.virtual.phone import VirtualPhone

__all__ = [
    "DEVICE_KIND",
    "Faults",
    "InputEvent",
    "InputKind",
    "InputSource",
    "PhoneControl",
    "PhoneIdentity",
    "PhoneInfo",
    "VirtualPhoneSpec",
    "VirtualPhone",
    "VirtualPhoneHost",
]
