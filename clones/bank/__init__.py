"""The bank clone, modelled on the China Construction Bank mobile app (com.chinamworld.main).

Invented data, Chinese labels as in the real app, no logos. Money is integer fen throughout.
"""

from typing import Any

from clones.bank.app import Bank
from clones.bank.samplers import SAMPLERS
from clones.base import get_clone, register
from realbench.state_params import register_state_samplers

register(Bank, "bank")


def _start_state(setup: Any) -> dict[str, Any]:
    return get_clone("bank").build_state(setup, {})


register_state_samplers("bank", _start_state, SAMPLERS)

__all__ = ["Bank"]
