"""realbench: the shared vocabulary of the sim-to-real testbed for mobile GUI agents.

`realbench` never imports `clones`, `devices` or `analysis` (except in `realbench.cli`);
they import it.
"""

from realbench.actions import (
    Action,
    Answer,
    Click,
    DoubleClick,
    Key,
    KeyPress,
    LongPress,
    OpenApp,
    Swipe,
    Terminate,
    TerminateStatus,
    Type,
    Wait,
    action_from_json,
    action_to_json,
    parse_action,
)
from realbench.errors import RealbenchError
from realbench.observation import ImageFormat, Observation, Screenshot
from realbench.outcome import Outcome, Verdict

__all__ = [
    "Action",
    "Answer",
    "Click",
    "DoubleClick",
    "ImageFormat",
    "Key",
    "KeyPress",
    "LongPress",
    "Observation",
    "OpenApp",
    "Outcome",
    "RealbenchError",
    "Screenshot",
    "Swipe",
    "Terminate",
    "TerminateStatus",
    "Type",
    "Verdict",
    "Wait",
    "action_from_json",
    "action_to_json",
    "parse_action",
]
__version__ = "0.1.0"
