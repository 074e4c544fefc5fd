"""UI events of the account: sale-start reminders, passengers, messages and settings."""

from __future__ import annotations

from datetime import timedelta

from clones.base import State, UIEvent, back, clock_of, navigate, require
from clones.train_ticketing import booking
from clones.train_ticketing.timetable import find_train
from clones.train_ticketing.ui import (
    CLEARABLE_FIELDS,
)


class AccountHandlers:
    """Handlers mixed into `TrainTicketing`; each mutates the state in place or raises CloneError."""

    # reminders

    def _add_reminder(self, state: State, ev: UIEvent) -> None:
        s = state["ui"]["search"]
        today = clock_of(state).date()
        state["ui"]["reminder"] = {
            "from": s["from"],
            "to": s["to"],
            "date": (today + timedelta(days=int(state["world"]["presale_days"]))).isoformat(),
        }
        navigate(state, "reminder_add")

    def _save_reminder(self, state: State, ev: UIEvent) -> None:
        r = state["ui"]["reminder"]
        require(r is not None, "请重新设置提醒")
        booking.create_reminder(state, r["from"], r["to"], r["date"])
        state["ui"]["reminder"] = None
        back(state)
        state["ui"]["toast"] = "起售提醒设置成功"

    def _delete_reminder(self, state: State, ev: UIEvent) -> None:
        before = len(state["user"]["reminders"])
        state["user"]["reminders"] = [r for r in state["user"]["reminders"] if r["id"] != ev.arg]
        require(len(state["user"]["reminders"]) < before, "提醒不存在")

    def _search_train_no(self, state: State, ev: UIEvent) -> None:
        query = state["ui"]["form"].get("train_no_query", "").strip().upper()
        require(bool(query), "请输入车次")
        require(find_train(state["world"], query) is not None, f"未找到车次{query}")
        navigate(
            state,
            "train_stops",
            train=query,
            date=clock_of(state).date().isoformat(),
            **{"from": "", "to": ""},
        )

    # passengers

    def _add_passenger(self, state: State, ev: UIEvent) -> None:
        for key in ("p_name", "p_id_no", "p_phone"):
            state["ui"]["form"][key] = ""
        navigate(state, "passenger_add", ptype="adult")

    def _set_ptype(self, state: State, ev: UIEvent) -> None:
        require(ev.arg in booking.PTYPE_LABELS, "未知旅客类型")
        state["ui"]["args"]["ptype"] = str(ev.arg)

    def _save_passenger(self, state: State, ev: UIEvent) -> None:
        form = state["ui"]["form"]
        args = state["ui"]["args"]
        name, id_no, phone = form.get("p_name", ""), form.get("p_id_no", ""), form.get("p_phone", "").strip()
        if state["ui"]["route"] == "passenger_edit":
            p = booking.passenger(state, args["pid"])
            booking.validate_passenger(state, p["name"], p["id_no"], phone, args["ptype"], editing=p["id"])
            p["phone"] = phone
            p["ptype"] = args["ptype"]
            back(state)
            state["ui"]["toast"] = "修改成功"
            return
        booking.add_passenger(state, name, id_no, phone, args.get("ptype", "adult"))
        back(state)
        state["ui"]["toast"] = "添加成功"

    def _edit_passenger(self, state: State, ev: UIEvent) -> None:
        p = booking.passenger(state, str(ev.arg))
        state["ui"]["form"]["p_phone"] = p["phone"]
        navigate(state, "passenger_edit", pid=p["id"], ptype=p["ptype"])

    def _ask_delete_passenger(self, state: State, ev: UIEvent) -> None:
        """删除 asks first in the app's native 温馨提示 dialog, with the body the ordering script matches."""
        state["ui"]["dialog"] = {
            "kind": "tip",
            "text": "确定要删除联系人吗？",
            "cancel": "取消",
            "sure_ev": "confirm_delete_passenger",
            "arg": ev.arg,
        }

    def _confirm_delete_passenger(self, state: State, ev: UIEvent) -> None:
        booking.delete_passenger(state, str(ev.arg))
        state["ui"]["dialog"] = None
        if state["ui"]["route"] == "passenger_edit":
            back(state)
        state["ui"]["toast"] = "删除成功"

    # messages and settings

    def _open_message(self, state: State, ev: UIEvent) -> None:
        msg = next((m for m in state["user"]["messages"] if m["id"] == ev.arg), None)
        require(msg is not None, "消息不存在")
        assert msg is not None
        msg["read"] = True
        navigate(state, "message_detail", id=msg["id"])

    def _delete_message(self, state: State, ev: UIEvent) -> None:
        before = len(state["user"]["messages"])
        state["user"]["messages"] = [m for m in state["user"]["messages"] if m["id"] != ev.arg]
        require(len(state["user"]["messages"]) < before, "消息不存在")
        if state["ui"]["route"] == "message_detail":
            back(state)
        state["ui"]["toast"] = "已删除"

    def _read_all(self, state: State, ev: UIEvent) -> None:
        for m in state["user"]["messages"]:
            m["read"] = True

    def _clear_field(self, state: State, ev: UIEvent) -> None:
        require(ev.arg in CLEARABLE_FIELDS, "未知输入框")
        state["ui"]["form"][str(ev.arg)] = ""

    def _toggle_setting(self, state: State, ev: UIEvent) -> None:
        settings = state["user"]["settings"]
        require(ev.arg in settings, "未知设置")
        settings[str(ev.arg)] = not settings[str(ev.arg)]
