"""Bank UI events of the FX rates and calculator."""

from __future__ import annotations

from clones.bank import queries as q
from clones.bank.handler_kit import arg, clear_form, form, on
from clones.bank.money import parse_yuan
from clones.base import State, UIEvent, navigate, require


@on("open_fx_calc")
def _open_fx_calc(state: State, event: UIEvent) -> None:
    code = event.arg or "USD"
    q.fx_rate(state, code)
    state["ui"]["fx"] = {"code": code, "dir": "buy", "result": None}
    clear_form(state, "fx_amount")
    navigate(state, "fx_calc")


@on("fx_ccy")
def _fx_ccy(state: State, event: UIEvent) -> None:
    code = arg(event)
    require(any(r["code"] == code for r in state["world"]["fx"]), "不支持的币种")
    state["ui"].setdefault("fx", {}).update(code=code, result=None)


@on("fx_dir")
def _fx_dir(state: State, event: UIEvent) -> None:
    d = arg(event)
    require(d in ("buy", "sell"), "未知的兑换方向")
    state["ui"].setdefault("fx", {}).update(dir=d, result=None)


@on("fx_calc")
def _fx_calc(state: State, event: UIEvent) -> None:
    fx = state["ui"].setdefault("fx", {"code": "USD", "dir": "buy"})
    amount = parse_yuan(form(state, "fx_amount"), field="外币金额")
    require(amount > 0, "请输入外币金额")
    fx["result"] = q.fx_convert(state, fx["code"], amount, fx["dir"])
    fx["amount_fen"] = amount
