"""The train-ticketing clone, modelled on the China Railway 12306 app (package ``com.MobileTicket``)."""

from clones.base import register
from clones.train_ticketing.app import DRIFT_RELABELS, TrainTicketing

register(TrainTicketing, "train_ticketing")

__all__ = ["DRIFT_RELABELS", "TrainTicketing"]
