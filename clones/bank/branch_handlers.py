"""Bank UI events of branches and appointments."""

from __future__ import annotations

from clones.bank import orders as od
from clones.bank import queries as q
from clones.bank.handler_kit import arg, form, on
from clones.base import State, UIEvent, navigate, replace_route, require


@on("branch_search")
def _branch_search(state: State, event: UIEvent) -> None:
    state["ui"]["branch_query"] = form(state, "branch_query")


@on("branch_filter")
def _branch_filter(state: State, event: UIEvent) -> None:
    f = arg(event)
    require(f in ("all", "weekend"), "未知的筛选条件")
    state["ui"]["branch_filter"] = f


@on("open_branch")
def _open_branch(state: State, event: UIEvent) -> None:
    navigate(state, "branch_detail", id=q.branch(state, arg(event))["id"])


@on("appt_start")
def _appt_start(state: State, event: UIEvent) -> None:
    b = q.branch(state, arg(event))
    state["ui"]["appt"] = {"branch": b["id"], "service": None, "date": None, "slot": None}
    navigate(state, "appointment", id=b["id"])


@on("appt_service")
def _appt_service(state: State, event: UIEvent) -> None:
    appt = state["ui"].get("appt") or {}
    s = arg(event)
    require(
        bool(appt.get("branch")) and s in q.branch(state, appt["branch"])["services"], "该网点不办理此业务"
    )
    appt["service"] = s


@on("appt_slot")
def _appt_slot(state: State, event: UIEvent) -> None:
    s = arg(event)
    require(s in state["world"]["appointment_slots"], "无效的时段")
    state["ui"].setdefault("appt", {})["slot"] = s


@on("appt_submit")
def _appt_submit(state: State, event: UIEvent) -> None:
    appt = state["ui"].get("appt") or {}
    require(bool(appt.get("service")), "请选择预约业务")
    require(bool(appt.get("date")), "请选择预约日期")
    require(bool(appt.get("slot")), "请选择预约时段")
    require(
        not any(a["date"] == appt["date"] and a["status"] == "已预约" for a in state["user"]["appointments"]),
        "您当天已有预约",
    )
    rec = {
        "id": od.next_id(state, "AP"),
        "branch": appt["branch"],
        "service": appt["service"],
        "date": appt["date"],
        "slot": appt["slot"],
        "status": "已预约",
        "created": od.now_iso(state),
    }
    state["user"]["appointments"].append(rec)
    state["ui"]["stack"] = [{"route": "home", "args": {}}]
    replace_route(state, "result", kind="appointment", id=rec["id"])
