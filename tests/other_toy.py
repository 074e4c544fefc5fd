"""A second toy clone for the tests: a snapshot of one clone must not restore into another's
session, and a handler with a deliberate bug shows how the server treats a broken handler."""

from __future__ import annotations

from typing import ClassVar

from clones.base import State, UIEvent, register, unregister
from clones.toy import ToyShop

OTHER_TOY = "toy_other"


class OtherToy(ToyShop):
    name: ClassVar[str] = OTHER_TOY
    package: ClassVar[str] = "com.example.other"

    def __init__(self) -> None:
        super().__init__()
        self.handlers["boom"] = self._boom

    def _boom(self, state: State, event: UIEvent) -> None:
        state["user"]["orders"].append({"item": -1})
        raise RuntimeError("a bug in a handler")


def register_other_toy() -> None:
    """Also what environment workers import (``tests.other_toy:register_other_toy``)."""
    register(OtherToy, OTHER_TOY)


def unregister_other_toy() -> None:
    unregister(OTHER_TOY)
