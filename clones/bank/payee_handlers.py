"""Bank UI events of the payee book."""

from __future__ import annotations

from clones.bank import orders as od
from clones.bank.handler_kit import arg, clear_form, dialog, form, on, toast
from clones.bank.transfer_handlers import payee_by_id
from clones.base import State, UIEvent, back, navigate, require


@on("payee_search")
def _payee_search(state: State, event: UIEvent) -> None:
    state["ui"]["payee_query"] = form(state, "payee_query")


@on("open_payee")
def _open_payee(state: State, event: UIEvent) -> None:
    navigate(state, "payee_detail", id=payee_by_id(state, arg(event))["id"])


@on("add_payee")
def _add_payee(state: State, event: UIEvent) -> None:
    clear_form(state, "pe_name", "pe_account", "pe_alias")
    state["ui"]["pe"] = {"id": None, "bank": ""}
    navigate(state, "payee_edit")


@on("edit_payee")
def _edit_payee(state: State, event: UIEvent) -> None:
    p = payee_by_id(state, arg(event))
    state["ui"]["form"].update(pe_name=p["name"], pe_account=p["account_no"], pe_alias=p["alias"])
    state["ui"]["pe"] = {"id": p["id"], "bank": p["bank"]}
    navigate(state, "payee_edit")


@on("save_payee")
def _save_payee(state: State, event: UIEvent) -> None:
    pe = state["ui"].get("pe") or {}
    name, acct, alias = (
        form(state, "pe_name"),
        form(state, "pe_account").replace(" ", ""),
        form(state, "pe_alias"),
    )
    require(bool(name), "请输入收款人户名")
    require(acct.isdigit() and 16 <= len(acct) <= 19, "请输入正确的收款账号（16-19位数字）")
    require(bool(pe.get("bank")), "请选择收款银行")
    require(len(alias) <= 10, "备注名不能超过10个字")
    payees = state["user"]["payees"]
    require(not any(p["account_no"] == acct and p["id"] != pe.get("id") for p in payees), "该收款人已存在")
    if pe.get("id"):
        p = payee_by_id(state, pe["id"])
        p.update(name=name, account_no=acct, bank=pe["bank"], alias=alias)
    else:
        payees.append(
            {
                "id": od.next_id(state, "p"),
                "name": name,
                "bank": pe["bank"],
                "account_no": acct,
                "alias": alias,
            }
        )
    state["ui"]["pe"] = None
    back(state)
    toast(state, "收款人已保存")


@on("delete_payee")
def _delete_payee(state: State, event: UIEvent) -> None:
    dialog(state, "delete_payee", id=payee_by_id(state, arg(event))["id"])


@on("delete_payee_confirm")
def _delete_payee_confirm(state: State, event: UIEvent) -> None:
    pid = payee_by_id(state, arg(event))["id"]
    state["user"]["payees"] = [p for p in state["user"]["payees"] if p["id"] != pid]
    state["ui"]["dialog"] = None
    back(state)
    toast(state, "收款人已删除")
