"""The toy shop: the smallest complete clone, and the worked example of docs/adding-a-clone.md.

Not a model of a real app: a home screen with a search form, a scrolling list of items (tap
opens, long press favourites), an item page with a buy button that the app may refuse. Its
verifier and side-effect check live in `clones.toy.verifiers`."""

from __future__ import annotations

import html
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict

from clones.base import Clone, State, UIEvent, deep_merge, navigate, new_state, require
from realbench.taskpack import CloneSetup

TOY = "toy_shop"
ITEM_COUNT = 40


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
            rows = "".join(
                f'<div class="list-item" id="item_{it["id"]}" data-ev="open_item" data-arg="{it["id"]}" '
                f'data-lp-ev="fav" data-lp-arg="{it["id"]}"><div class="main">{it["name"]}'
                f'<div class="sub">库存 {it["stock"]}</div></div><span class="price">¥{it["price"]}</span></div>'
                for it in state["world"]["items"]
            )
            return (
                '<div class="navbar"><div class="back" data-ev="__back__" aria-label="返回"></div>'
                '<div class="title">商品列表</div></div>'
                f'<div class="scroll" id="item_list"><div class="list">{rows}</div></div>'
            )
        if route == "item":
            item = state["world"]["items"][ui["args"]["item"]]
            qty = html.escape(ui["form"].get("qty", "1"))
            return (
                '<div class="navbar"><div class="back" data-ev="__back__" aria-label="返回"></div>'
                f'<div class="title">{item["name"]}</div></div>'
                f'<div class="scroll"><div class="card"><div class="card-title">{item["name"]}</div>'
                f'<div class="price" id="price">¥{item["price"]}</div></div>'
                f'<div class="field"><label>数量</label><input name="qty" id="qty" value="{qty}"></div>'
                '<button class="btn btn-primary btn-block" id="buy" data-ev="buy">购买</button></div>'
            )
        query = html.escape(ui["form"].get("query", ""))
        searches = "".join(
            f'<div class="list-item">{html.escape(q)}</div>' for q in state["user"]["searches"]
        )
        return (
            '<div class="navbar primary"><div class="title">玩具店</div></div>'
            '<div class="scroll">'
            '<form data-ev="search"><div class="field"><input name="query" id="query" placeholder="搜索商品" '
            f'value="{query}"></div></form>'
            '<button class="btn btn-block" id="go_list" data-ev="open_list">商品列表</button>'
            f'<div class="list" id="history">{searches}</div></div>'
            '<div class="tabbar"><div class="tab active" data-ev="open_list"><span class="icon"></span>首页</div>'
            '<div class="tab"><span class="icon"></span>我的</div></div>'
        )
