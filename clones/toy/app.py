"""The toy shop: the smallest complete clone, and the worked example of docs/adding-a-clone.md.

Not a model of a real app: a home screen with a search form, a scrolling list of items (tap
opens, long press favourites), an item page with a buy button that the app may refuse. Its
verifier and side-effect check live in `clones.toy.verifiers`; its screens are the Jinja templates
in `clones/toy/templates/`, rendered with autoescaping (every state string is text, never markup:
a search a user typed or a state an API client put cannot inject a script)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from jinja2 import Environment, StrictUndefined, Template
from pydantic import BaseModel, ConfigDict

from clones.base import Clone, State, UIEvent, deep_merge, navigate, new_state, require
from realbench.taskpack import CloneSetup

TOY = "toy_shop"
ITEM_COUNT = 40
TEMPLATES = Path(__file__).parent / "templates"


@cache
def _template(name: str) -> Template:
    """A screen's template, autoescaped. Its source lines are joined without a break: the page and
    the hierarchy dump parse the markup as it is, and a newline between tags would be a text node."""
    source = "".join((TEMPLATES / f"{name}.html").read_text(encoding="utf-8").splitlines())
    return Environment(autoescape=True, undefined=StrictUndefined).from_string(source)


def _page(name: str, **values: Any) -> str:
    return _template(name).render(**values)


class ToySetupData(BaseModel):
    """What a task's `clone.setup.data` may say to the toy shop."""

    model_config = ConfigDict(extra="forbid")

    data_seed: int | None = None  # the item-data seed (set by the clone server for drift profiles)


class ToyShop(Clone):
    name: ClassVar[str] = TOY
    package: ClassVar[str] = "com.example.toyshop"
    title: ClassVar[str] = "玩具店"
    setup_data: ClassVar[type[BaseModel] | None] = ToySetupData
    drift_relabels: ClassVar[dict[str, str]] = {"购买": "立即购买", "商品列表": "全部商品", "搜索": "查找"}

    def __init__(self) -> None:
        super().__init__()
        self.handlers.update(
            {
                "open_list": lambda s, e: navigate(s, "list"),
                "open_item": self._open_item,
                "buy": self._buy,
                "fav": self._fav,
                "search": self._search,
            }
        )
        from clones.toy.verifiers import SIDE_EFFECT_CHECKS, VERIFIERS

        self.verifiers.update(VERIFIERS)
        self.side_effect_checks.update(SIDE_EFFECT_CHECKS)

    def build_state(self, setup: CloneSetup, params: dict[str, Any]) -> State:
        seed = int(setup.data.get("data_seed", setup.seed))
        rng = np.random.default_rng(seed)
        items = [
            {
                "id": i,
                "name": f"商品{i:02d}",
                "price": int(rng.integers(5, 200)),
                "stock": int(rng.integers(0, 3)),
            }
            for i in range(ITEM_COUNT)
        ]
        state = new_state(
            {"items": items}, {"orders": [], "favs": [], "searches": []}, setup.route or "home", setup.clock
        )
        return deep_merge(state, setup.patch)

    def routes(self) -> list[str]:
        return ["home", "list", "item"]

    # --- handlers ---

    def _open_item(self, state: State, event: UIEvent) -> None:
        navigate(state, "item", item=int(event.arg or 0))

    def _buy(self, state: State, event: UIEvent) -> None:
        item = state["world"]["items"][state["ui"]["args"]["item"]]
        require(item["stock"] > 0, "库存不足")
        state["user"]["orders"].append({"item": item["id"], "qty": int(state["ui"]["form"].get("qty") or 1)})

    def _fav(self, state: State, event: UIEvent) -> None:
        state["user"]["favs"].append(int(event.arg or 0))

    def _search(self, state: State, event: UIEvent) -> None:
        state["user"]["searches"].append(state["ui"]["form"].get("query", ""))

    # --- screens ---

    def render(self, state: State) -> str:
        ui = state["ui"]
        route = ui["route"]
        if route == "list":
            return _page("list", items=state["world"]["items"])
        if route == "item":
            item = state["world"]["items"][ui["args"]["item"]]
            return _page("item", item=item, qty=ui["form"].get("qty", "1"))
        return _page("home", query=ui["form"].get("query", ""), searches=state["user"]["searches"])
