"""The train clone's screens carry what public scripts for the real 12306 app rely on
(REAL_APPS.md section 1): the home's ids and descriptions, the activities, the H5 pages' classes and
accessibility strings. Plans run against the rendered HTML (clones/dom_plan.py), which mirrors the
page runtime's hierarchy dump; what the account holds is read from the clone state itself."""

from __future__ import annotations

import re

from clones.dom_plan import DomPlanRunner, PlanStepError, screen_page
from clones.train_ticketing.lunar import lunar_label
from clones.train_ticketing.ui import H5_ACTIVITY, MAIN_ACTIVITY
from realbench.hierarchy import Selector
from realbench.taskpack import CloneSetup, PlanStep
from tests.tt_support import CLONE

BUTTON = "android.widget.Button"


def _runner(**data: object) -> DomPlanRunner:
    return DomPlanRunner(CLONE, CLONE.build_state(CloneSetup(data=dict(data)), {}), {})


def _tap(r: DomPlanRunner, **sel: object) -> None:
    r.step(PlanStep(tap=Selector.model_validate(sel)))


def _has(r: DomPlanRunner, **sel: object) -> bool:
    try:
        r.find(Selector.model_validate(sel))
    except PlanStepError:
        return False
    return True


def _activity(r: DomPlanRunner) -> str:
    found = re.search(r'data-activity="([^"]+)"', screen_page(CLONE, r.state))
    assert found is not None
    return found.group(1)


def test_the_home_carries_the_script_ids_and_descriptions() -> None:
    r = _runner()
    search = r.state["ui"]["search"]
    assert r.find(Selector(resource_id="ticket_home_btn_search")).node.text == "查询车票"
    dep = r.find(Selector(resource_id="home_page_train_dep1")).node
    arr = r.find(Selector(resource_id="home_page_train_arr1")).node
    assert dep.content_desc == f"出发站: {search['from']}" and arr.content_desc == f"到达站: {search['to']}"
    date_row = r.find(Selector(resource_id="home_page_depart_date_view_container")).node
    assert date_row.clickable and re.search(r"\d+月\d+日", date_row.content_desc)
    week_day = r.find(Selector(resource_id="home_page_depart_week_day")).node.text
    assert week_day in ("今天", "明天", "后天") or week_day.startswith("周")
    for rid, text in (
        ("ticket_home_bottom_bar_ticket", "首页"),
        ("ticket_home_bottom_bar_order", "订单"),
        ("ticket_home_bottom_bar_mine", "我的"),
    ):
        assert r.find(Selector(resource_id=rid)).node.text == text
    assert _has(r, resource_id="home_page_student") and _has(r, resource_id="tv_city")
    # the ids no script uses are gone
    for old in ("hp_query_button", "from_station", "to_station", "date_row", "student_toggle", "tab_home"):
        assert not _has(r, resource_id=old), old
    _tap(r, resource_id="home_page_student")
    assert r.state["ui"]["search"]["student"]


def test_home_and_tabs_are_main_activity_and_booking_pages_h5() -> None:
    r = _runner()
    assert _activity(r) == MAIN_ACTIVITY
    _tap(r, resource_id="home_page_train_dep1")
    assert r.route == "station_picker" and _activity(r) == H5_ACTIVITY
    _tap(r, text="取消", class_name=BUTTON)
    assert r.route == "home"
    _tap(r, resource_id="ticket_home_btn_search")
    assert r.route == "train_list" and _activity(r) == H5_ACTIVITY
    tabs = _runner()
    for rid, route in (
        ("ticket_home_bottom_bar_mine", "mine"),
        ("ticket_home_bottom_bar_order", "orders_unfinished"),
    ):
        _tap(tabs, resource_id=rid)
        assert tabs.route == route and _activity(tabs) == MAIN_ACTIVITY


def test_station_picker_types_into_its_edittext_and_offers_station_buttons() -> None:
    r = _runner()
    _tap(r, resource_id="home_page_train_arr1")
    assert _has(r, text="热门车站") and _has(r, text="取消", class_name=BUTTON)
    assert r.find(Selector(text="上海", class_name=BUTTON)).node.clickable
    r.step(
        PlanStep.model_validate({"type": {"text": "南京", "into": {"class_name": "android.widget.EditText"}}})
    )
    _tap(r, text="火车站 南京南站", class_name=BUTTON)
    assert r.route == "home" and r.state["ui"]["search"]["to"] == "南京南"
    _tap(r, resource_id="home_page_train_arr1")
    assert _has(r, text="最近常用")  # the station just picked


def test_date_picker_days_are_buttons_with_month_day_and_lunar_date() -> None:
    r = _runner()
    _tap(r, resource_id="home_page_depart_date_view_container")
    assert r.find(Selector(resource_id="h5_title")).node.text == "选择日期"
    day = r.find(Selector(text_pattern="3月3日*农历*", class_name=BUTTON)).node
    assert day.text.startswith("3月3日 周二 农历正月十五") and day.clickable
    _tap(r, text_pattern="3月4日*农历*", class_name=BUTTON)
    assert r.route == "home" and r.state["ui"]["search"]["date"] == "2026-03-04"
    # the table's known festivals
    assert lunar_label("2026-02-17") == "农历正月初一" and lunar_label("2026-09-25") == "农历八月十五"
    assert lunar_label("2025-08-29") == "农历七月初七" and lunar_label("2030-01-01") == ""


def test_train_rows_are_one_spaced_string_and_cards_unfold_on_a_seat_label() -> None:
    r = _runner()
    _tap(r, resource_id="ticket_home_btn_search")
    assert r.find(Selector(resource_id="h5_title")).node.text == "北京 <> 上海"
    assert _has(r, text="直达") and _has(r, text="中转")
    rows = [d.node for d in r.nodes if d.node.class_name == BUTTON and "次列车" in d.node.text]
    assert rows
    first = rows[0].text
    assert re.fullmatch(
        r"([A-Z] )+?\d( \d)*次列车\d\d点\d\d分从\S+出发\d\d点\d\d分到达\S+,历时\d+时\d+分,", first
    ), first
    train = "".join(first.split("次列车")[0].split())
    # a script names the train without spaces and finds the spaced string
    assert r.find(Selector(text_contains=f"{train}次列车", class_name=BUTTON)).node.text == first
    assert not _has(r, text="预订")  # collapsed cards have no 预订
    _tap(r, text_contains="二等", class_name=BUTTON)
    panel = [d.node.text for d in r.nodes if d.attrs.get("id") == "seat_label"]
    assert panel and panel[0] == "二等座"
    _tap(r, text_contains="二等", class_name=BUTTON)  # a second tap on the label keeps it unfolded
    assert _has(r, text="预订", class_name=BUTTON)
    _tap(r, text="预订", class_name=BUTTON)
    assert r.route == "order_form" and r.state["ui"]["booking"]["cls"] == "edz"


def test_home_history_entry_is_text_with_double_dash_and_the_switch_description() -> None:
    r = _runner()
    frm, to = r.state["user"]["recent_searches"][-1].split("|")
    entry = r.find(Selector(text=f"{frm}--{to}")).node
    assert entry.content_desc == f"根据查询历史将目的地切换为 {frm}  到 {to}"
    assert not _has(r, text=f"{frm}-{to}")  # the clone's old single-dash label is gone
    _tap(r, text=f"{frm}--{to}")
    assert (r.state["ui"]["search"]["from"], r.state["ui"]["search"]["to"]) == (frm, to)


def test_first_row_string_holds_the_departure_time_a_recipe_reads() -> None:
    r = _runner()
    _tap(r, resource_id="ticket_home_btn_search")
    row = r.find(Selector(text_contains="次列车", class_name=BUTTON)).node.text
    dep = re.search(r"次列车(\d+点\d+分)从", "".join(row.split()))
    assert dep is not None, row
    # the list is sorted by departure, so the first row's time is the earliest the timetable shows
    times = [
        re.search(r"次列车(\d+)点(\d+)分", "".join(d.node.text.split()))
        for d in r.nodes
        if d.node.class_name == BUTTON and "次列车" in d.node.text
    ]
    mins = [int(m.group(1)) * 60 + int(m.group(2)) for m in times if m]
    assert mins and mins[0] == min(mins)


def test_unpaid_order_opens_by_its_status_and_cancels_by_the_script_label() -> None:
    r = _runner(scenario="with_orders")
    unpaid = next(o for o in r.state["user"]["orders"] if o["status"] == "unpaid")
    _tap(r, resource_id="ticket_home_bottom_bar_order")
    _tap(r, text="待支付")
    assert r.route == "order_detail"
    _tap(r, text="取消订单")
    _tap(r, text="确认取消")
    after = next(o for o in r.state["user"]["orders"] if o["id"] == unpaid["id"])
    assert after["status"] == "cancelled"


def test_confirm_page_radio_buttons_passenger_checkboxes_and_submit_without_id() -> None:
    r = _runner(scenario="mid_booking")  # G101, 二等座, two riders
    assert r.route == "order_form"
    assert r.find(Selector(resource_id="h5_title")).node.text == "确认订单"
    radios = [d.node for d in r.nodes if d.node.class_name == "android.widget.RadioButton"]
    assert radios and sum(n.checked for n in radios) == 1
    submit = r.find(Selector(text="提交订单")).node
    assert submit.class_name == BUTTON and submit.resource_id == ""
    assert _has(r, text="选座服务") and r.find(Selector(text="A", class_name=BUTTON)).node.clickable
    before = list(r.state["ui"]["booking"]["passengers"])
    _tap(r, text="选择乘车人")
    assert r.find(Selector(resource_id="h5_title")).node.text == "选择乘车人"
    boxes = [d.node for d in r.nodes if d.node.class_name == "android.widget.CheckBox"]
    assert boxes and all(re.fullmatch(r"\S+，(成人|儿童|学生)，\S+", b.text) for b in boxes)
    name = next(p["name"] for p in r.state["user"]["passengers"] if p["id"] not in before)
    _tap(r, text_contains=f"{name}，", class_name="android.widget.CheckBox")
    _tap(r, resource_id="h5_bt_text")
    assert r.route == "order_form"
    assert len(r.state["ui"]["booking"]["passengers"]) == len(before) + 1
    assert _has(r, text=f"删除乘车人{name}")


def test_after_submit_the_unfinished_page_pays_and_leaving_asks_first() -> None:
    r = _runner(scenario="mid_booking")
    _tap(r, text="提交订单", class_name=BUTTON)
    order = r.state["user"]["orders"][-1]
    assert r.find(Selector(resource_id="h5_title")).node.text == "未完成"
    pay = r.find(Selector(text="立即支付")).node
    assert pay.class_name == BUTTON and pay.resource_id == ""
    _tap(r, resource_id="h5_tv_nav_back")
    assert r.find(Selector(resource_id="title")).node.text == "温馨提示"
    assert "确定要放弃支付吗" in r.find(Selector(resource_id="content")).node.text
    _tap(r, resource_id="cancel")
    assert r.route == "order_pay" and not _has(r, resource_id="content")
    _tap(r, resource_id="h5_tv_nav_back")
    _tap(r, resource_id="sure")
    assert r.route != "order_pay"
    # leaving does not pay or cancel: the account's order is still unpaid
    assert next(o for o in r.state["user"]["orders"] if o["id"] == order["id"])["status"] == "unpaid"


def test_logged_out_mine_and_login_page_use_the_script_forms() -> None:
    r = _runner(logged_in=False)
    _tap(r, resource_id="ticket_home_bottom_bar_mine")
    entry = r.find(Selector(text="未登录,点击去登录")).node
    assert entry.class_name == BUTTON
    _tap(r, text="未登录,点击去登录")
    assert r.route == "login" and _has(r, text="欢迎登录")
    edits = [d.node for d in r.nodes if d.node.class_name == "android.widget.EditText"]
    assert [e.short_id for e in edits[:2]] == ["usernameinput", "passwordinput"]
    assert r.find(Selector(text="登录", class_name=BUTTON)).node.clickable


def test_passenger_management_rows_delete_and_next_follow_the_ordering_script() -> None:
    r = _runner()
    _tap(r, resource_id="ticket_home_bottom_bar_mine")
    _tap(r, text="常用乘车人")
    assert r.find(Selector(resource_id="h5_title")).node.text == "乘车人"
    boxes = [d.node for d in r.nodes if d.node.class_name == "android.widget.CheckBox"]
    assert len(boxes) == len(r.state["user"]["passengers"])
    assert all(re.match(r"\S+，(成人|儿童|学生)，\S+", b.text) for b in boxes)
    other = next(p for p in r.state["user"]["passengers"] if not p.get("self"))
    _tap(r, text_contains=f"{other['name']}，", class_name="android.widget.CheckBox")
    assert r.route == "passenger_edit"
    assert r.find(Selector(text="下一步", class_name=BUTTON)).node.resource_id.endswith("save_passenger")
    assert r.find(Selector(resource_id="h5_bt_text")).node.text == "删除"
    _tap(r, resource_id="h5_bt_text")
    # the question is the native 温馨提示 dialog whose body the script matches; 取消 keeps the passenger
    assert r.find(Selector(resource_id="title")).node.text == "温馨提示"
    assert "确定要删除联系人吗" in r.find(Selector(resource_id="content")).node.text
    _tap(r, resource_id="cancel")
    assert any(p["id"] == other["id"] for p in r.state["user"]["passengers"])
    _tap(r, resource_id="h5_bt_text")
    _tap(r, resource_id="sure")
    assert all(p["id"] != other["id"] for p in r.state["user"]["passengers"])
    # the account holder's own row has nothing to delete
    assert r.route == "passengers"
    me = next(p for p in r.state["user"]["passengers"] if p.get("self"))
    _tap(r, text_contains=f"{me['name']}，", class_name="android.widget.CheckBox")
    assert r.route == "passenger_edit" and not _has(r, resource_id="h5_bt_text")
