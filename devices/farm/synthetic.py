"""A synthetic task pack for farm reliability tests and benchmarks (labelled synthetic everywhere).

Its tasks drive the virtual phone's static ticket screen ("我的订单" / back …) and, with a
boundary, end by reaching "候补购票" declared as the commit boundary, so every healthy episode
ends deterministically as `boundary_reached` and anything else is a fault leaking into a score.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from realbench.taskpack import TaskPack, parse_pack

TICKET = "com.MobileTicket"
BOUNDARY_LABEL = "候补购票"


def synthetic_pack_dict(
    *, tasks: int = 1, steps: int = 1, with_boundary: bool = True, probe: bool = True, login: bool = False
) -> dict[str, Any]:
    """`login`: declare the test login form (username, password, login_button) as the pack's login
    screen, so a rig's login recipe may type credentials through the guard's login door."""
    golden: list[dict[str, Any]] = []
    for _ in range(steps):
        golden += [{"tap": {"text": "我的订单"}}, {"key": "back"}]
    if with_boundary:
        golden.append({"tap": {"text": BOUNDARY_LABEL}})
    golden.append({"terminate": "success"})
    task_list = []
    for i in range(tasks):
        task: dict[str, Any] = {
            "id": f"farm-{i}",
            "instruction": "打开我的订单，返回，然后进入候补购票",
            "difficulty": 1,
            "max_steps": 2 * steps + 3,
            "clone": {"verifier": {"name": "noop"}},
            "judge": {
                "rubric": "Synthetic farm task: the orders screen was opened, then the boundary reached."
            },
            "golden": golden,
        }
        if with_boundary:
            task["real"] = {"boundary": [{"text": BOUNDARY_LABEL}]}
        task_list.append(task)
    return {
        "app": "train_ticketing",
        "clone": "train_ticketing",
        "title": "synthetic farm pack (virtual phone static screens)",
        "real_app": {
            "package": TICKET,
            "name": "铁路12306",
            "forbidden": [{"text": "立即支付"}],
            **({"logged_in_probe": {"text": "车票预订"}} if probe else {}),
            **(
                {
                    "login_screen": "login",
                    "safe_screens": [
                        {
                            "name": "login",
                            "when": [{"resource_id": "login_button"}],
                            "allow": [],
                            "controls": ["username", "password", "login_button"],
                        }
                    ],
                }
                if login
                else {}
            ),
        },
        "tasks": task_list,
    }


def synthetic_pack(**kwargs: Any) -> TaskPack:
    return parse_pack(synthetic_pack_dict(**kwargs), "<synthetic farm pack>")


def write_synthetic_pack(folder: Path, **kwargs: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "pack.yaml"
    path.write_text(
        yaml.safe_dump(synthetic_pack_dict(**kwargs), allow_unicode=True, sort_keys=False), encoding="utf-8"
    )
    return path
