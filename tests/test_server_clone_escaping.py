"""Clone pages render state strings as text: an injected script neither renders raw nor runs.

The poisoning conformance check (clones.conformance.poison_problems) is attacked first: a clone
that renders a state string with an f-string, and the bank and train clones with their template
engine's autoescaping turned off, must each be a finding. Then the page itself in Chromium: a
session whose state carries a script must keep its server state (read from the server)."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from clones.base import Clone, State, clone_names, get_clone
from clones.conformance import POISON_TAG, poison_problems
from clones.toy.app import ToyShop


class RawToy(ToyShop):
    """The defect under test: the search history rendered with an f-string, unescaped."""

    def render(self, state: State) -> str:
        html = super().render(state)
        if state["ui"]["route"] == "home":
            html += "".join(f"<div>{q}</div>" for q in state["user"]["searches"])
        return html


def test_the_conformance_check_poisons_every_registered_clone():
    """tests/test_conformance.py runs check_clone over every clone; it must include the poisoning."""
    from clones import conformance

    assert clone_names()
    called: list[str] = []
    real = conformance.poison_problems

    def spy(clone, *args, **kwargs):  # type: ignore[no-untyped-def]
        called.append(clone.name)
        return real(clone, *args, per_route=1, max_states=2)

    conformance.poison_problems = spy  # type: ignore[assignment]
    try:
        conformance.check_clone(ToyShop(), max_states=5)
    finally:
        conformance.poison_problems = real  # type: ignore[assignment]
    assert called == ["toy_shop"]


def test_an_unescaped_f_string_is_a_finding():
    from realbench.taskpack import CloneSetup

    clone = RawToy()
    state = clone.build_state(CloneSetup(seed=1), {})
    state["user"]["searches"] = ["积木"]
    problems = poison_problems(clone, [state])
    assert any("user.searches.0" in p for p in problems), problems
    assert poison_problems(ToyShop(), [state]) == []


@pytest.mark.parametrize("name", ["bank", "train_ticketing"])
def test_templates_without_autoescape_are_a_finding(name, monkeypatch):
    """Guards the check's reach into the template clones: turn their autoescaping off and the
    poisoned strings must show up raw."""
    import jinja2

    real_init = jinja2.Environment.__init__

    def unescaped(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        kwargs["autoescape"] = False
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(jinja2.Environment, "__init__", unescaped)
    if name == "bank":
        from clones.bank.app import Bank

        clone: Clone = Bank()
    else:
        from clones.train_ticketing import views

        views._env.cache_clear()
        clone = get_clone(name)
    try:
        problems = poison_problems(clone, per_route=1, max_states=6)
    finally:
        if name == "train_ticketing":
            views._env.cache_clear()
    assert problems, f"{name}: poisoning found nothing with autoescaping off"
    assert all(POISON_TAG in p or "unescaped" in p for p in problems)


@pytest.mark.browser
def test_an_injected_script_does_not_run_in_chromium_nor_change_the_server_state():
    sync_api = pytest.importorskip("playwright.sync_api")
    from clones.server import CloneServer
    from tests.console_support import CHROMIUM, CHROMIUM_ARGS

    if not Path(CHROMIUM).exists():
        pytest.fail(f"chromium is not installed at {CHROMIUM}")
    with CloneServer() as server:
        created = _post(server.url + "/api/sessions", {"clone": "toy_shop"})
        sid = created["session"]
        state = _get(f"{server.url}/api/sessions/{sid}/state")
        script = (
            "fetch('/api/sessions/SID/event',{method:'POST',headers:{'content-type':'application/json'},"
            "body:JSON.stringify({ev:'fav',arg:'7'})})"
        ).replace("SID", sid)
        # the list screen shows item names: the toy clone once put them in with an f-string
        state["world"]["items"][0]["name"] = f'<img src=x onerror="{script}">'
        state["world"]["items"][1]["name"] = f"<script>{script}</script>"
        state["ui"]["route"] = "list"
        _put(f"{server.url}/api/sessions/{sid}/state", state)
        with sync_api.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page()
                page.goto(f"{server.url}/s/{sid}")
                page.wait_for_selector("#item_list")
                shown = page.inner_text("#item_0")
                time.sleep(1.5)  # time for an injected handler to have fired
            finally:
                browser.close()
        after = _get(f"{server.url}/api/sessions/{sid}/state")
    assert after["user"]["favs"] == [], "an injected script changed the session's server state"
    assert "<img src=x" in shown  # shown as text, as typed


def _post(url: str, body: dict[str, Any]) -> Any:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.loads(resp.read())


def _put(url: str, body: dict[str, Any]) -> None:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}, method="PUT"
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        resp.read()


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as resp:
        return json.loads(resp.read())
