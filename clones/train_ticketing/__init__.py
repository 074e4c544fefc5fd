"""The train-ticketing clone, modelled on the China Railway 12306 app (package ``com.MobileTicket``)."""

from typing import Any

from clones.base import get_clone, register
from clones.train_ticketing.app import DRIFT_RELABELS, TrainTicketing
from clones.train_ticketing.samplers import SAMPLERS
from realbench.state_params import register_state_samplers

register(TrainTicketing, "train_ticketing")


def _start_state(setup: Any) -> dict[str, Any]:
    return get_clone("train_ticketing").build_state(setup, {})


register_state_samplers("train_ticketing", _start_state, SAMPLERS)

__all__ = ["DRIFT_RELABELS", "TrainTicketing"]
