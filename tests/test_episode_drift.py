"""An episode's drift is a function of the episode, not of the virtual phone that takes it, so
the same seed gives the same study however episodes are spread over a rig's phones."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from devices.virtual.clone_screen import episode_drift


def test_episode_drift_depends_on_the_episode_only():
    phone_a = {"profile": "mild", "seed": 0}
    phone_b = {"profile": "mild", "seed": 1}
    assert episode_drift(phone_a, "book_ticket:3") == episode_drift(phone_b, "book_ticket:3")
    assert episode_drift(phone_a, "book_ticket:3") != episode_drift(phone_a, "book_ticket:4")
    assert episode_drift(phone_a, "book_ticket:3")["profile"] == "mild"
    # Stable across processes (no Python hash randomisation): a fixed value.
    assert (
        episode_drift(phone_a, "t:0")["seed"] == episode_drift({"profile": "mild", "seed": 9}, "t:0")["seed"]
    )


@pytest.mark.farm
@pytest.mark.browser
@pytest.mark.skipif(
    not Path(os.environ.get("REALBENCH_CHROMIUM", "/usr/bin/chromium")).exists(), reason="needs Chromium"
)
def test_two_phones_show_an_episode_with_the_same_drift():
    from devices.virtual import VirtualPhoneHost
    from devices.virtual.control import PhoneControl

    pkg = "com.MobileTicket"
    with VirtualPhoneHost() as host:
        host.start(2, screens="clone", drift="heavy")
        a, b = host.phones
        assert a.spec.seed != b.spec.seed
        controls = [PhoneControl(host.info(p).control_url) for p in (a, b)]
        for c in controls:
            c.provision(pkg, {}, {}, episode="some_task:7")
        da, db = (p.ui.source(pkg).drift for p in (a, b))
        assert da == db and da == episode_drift({"profile": "heavy", "seed": 0}, "some_task:7")
        # The app's world data (heavy drift reseeds it) is the episode's too.
        assert controls[0].app_state(pkg) == controls[1].app_state(pkg)
        controls[0].provision(pkg, {}, {}, episode="some_task:8")
        assert a.ui.source(pkg).drift != db
