"""The real apps' own interruptions, as public evidence describes them, for drift variants.

Each entry is a pop-up or banner the real app shows (public Android ad-skip rule sets name their
view ids and button texts, see REAL_APPS.md): the overlay uses those view ids and texts, so
selectors and pop-up rules written for the real app work on the clone. What the evidence does not
say — the wording of titles and bodies, the artwork, when exactly each appears — is a guess, and
every one is shown at launch, in the order listed. They are drift (the `interruptions` profile,
or `Drift.interruptions`), never the clone's default: none has been seen on a phone here.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

# The event the overlays post (kept equal to clones.drift.DRIFT_EVENT, which imports this module).
_DISMISS = "__drift__"


@dataclass(frozen=True)
class Interruption:
    name: str
    evidence: str  # what is known and where from; the rest of the markup is a guess
    markup: str


def _button(label: str, view_id: str, name: str, cls: str = "btn dialog-btn") -> str:
    return (
        f'<button class="{cls}" id="{view_id}" data-ev="{_DISMISS}" data-arg="{name}">'
        f"{html.escape(label)}</button>"
    )


def _dialog(name: str, title: str, body: str, buttons: list[tuple[str, str]]) -> str:
    btns = "".join(_button(label, view_id, name) for label, view_id in buttons)
    return (
        f'<div class="modal" id="rb_{name}"><div class="dialog" role="dialog">'
        f'<div class="dialog-title">{html.escape(title)}</div>'
        f'<div class="dialog-body">{html.escape(body)}</div>'
        f'<div class="dialog-actions">{btns}</div></div></div>'
    )


def _corner_close(name: str, view_id: str, title: str, body: str, desc: str) -> str:
    """A card with an image-like close control in its corner (no text, a content description)."""
    return (
        f'<div class="modal" id="rb_{name}"><div class="dialog rb-card" role="dialog">'
        f'<button class="rb-corner-close" id="{view_id}" aria-label="{html.escape(desc)}" '
        f'data-ev="{_DISMISS}" data-arg="{name}">×</button>'
        f'<div class="dialog-title">{html.escape(title)}</div>'
        f'<div class="dialog-body">{html.escape(body)}</div></div></div>'
    )


TRAIN_TICKETING: tuple[Interruption, ...] = (
    Interruption(
        "tt_upgrade",
        "[rules] an upgrade dialog (最新版本升级内容) with the buttons cancel_btn 稍后再说 and ok_btn 立即安装",
        _dialog(
            "tt_upgrade",
            "最新版本升级内容",
            "新版本已下载完成，是否立即安装？",
            [("稍后再说", "cancel_btn"), ("立即安装", "ok_btn")],
        ),
    ),
    Interruption(
        "tt_location",
        "[rules] a location permission prompt (开启定位权限) closed by the view img_close",
        _corner_close(
            "tt_location", "img_close", "开启定位权限", "开启定位权限，为您推荐附近车站与出行服务。", "关闭"
        ),
    ),
    Interruption(
        "tt_student",
        "[rules] a student-ticket pop-up closed by the view cancel",
        _dialog(
            "tt_student",
            "学生票购票提醒",
            "学生票需核验学生资质，请在乘车人中完善学生信息。",
            [("取消", "cancel"), ("去完善", "btn_student_go")],
        ),
    ),
    Interruption(
        "tt_prefill",
        "[rules] a 预填信息购票 dialog confirmed by the view sure",
        _dialog(
            "tt_prefill",
            "预填信息购票",
            "可提前预填乘车人和席别信息，开售后快速提交订单。",
            [("我知道了", "sure")],
        ),
    ),
    Interruption(
        "tt_announcement",
        "[rules] an announcement banner at the bottom, closed by the view iv_tip_close (关闭公告)",
        f'<div class="rb-banner" id="rb_tt_announcement" role="note">'
        f'<span class="rb-banner-text">公告：请通过官方渠道购票，谨防诈骗。</span>'
        f'<button class="rb-banner-close" id="iv_tip_close" aria-label="关闭公告" '
        f'data-ev="{_DISMISS}" data-arg="tt_announcement">×</button></div>',
    ),
)

BANK: tuple[Interruption, ...] = (
    Interruption(
        "ccb_start_dialog",
        "[rules] a start-up ad dialog (StartDialogActivity) with a pager tip_view_pager, closed by the view close",
        # its own activity (GKD rules match it there), which the phone reports while it shows
        f'<div class="modal" id="rb_ccb_start_dialog" data-activity="com.ccb.start.view.startdialog.StartDialogActivity">'
        f'<div class="dialog rb-card" role="dialog">'
        f'<div class="rb-ad-art" id="tip_view_pager" aria-label="活动"><div class="rb-ad-title">龙卡信用卡</div>'
        f'<div class="rb-ad-sub">新户专享 好礼相送</div></div>'
        f'<button class="rb-corner-close" id="close" aria-label="关闭" data-ev="{_DISMISS}" '
        f'data-arg="ccb_start_dialog">×</button></div></div>',
    ),
    Interruption(
        "ccb_vpn_risk",
        "[rules] a VPN-risk dialog whose button reads 知晓风险，继续使用",
        _dialog(
            "ccb_vpn_risk",
            "安全提示",
            "检测到您的设备正在使用VPN，可能存在安全风险。",
            [("退出", "btn_exit_vpn"), ("知晓风险，继续使用", "btn_vpn_continue")],
        ),
    ),
)

CATALOGUE: dict[str, tuple[Interruption, ...]] = {"train_ticketing": TRAIN_TICKETING, "bank": BANK}


def interruptions_of(clone_name: str) -> dict[str, Interruption]:
    return {i.name: i for i in CATALOGUE.get(clone_name, ())}
