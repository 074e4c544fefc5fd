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

# The notice a public CCB script waits for after login and dismisses, matched there by its whole text.
ID_EXPIRY_TEXT = (
    "尊敬的客户，您在我行存留的身份证件即将到期，为避免影响您办理业务，"
    "请尽快到建行手机银行、网上银行或网点等渠道更新信息。"
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
    Interruption(
        "ccb_float_window",
        "[script] a floating window on the home closed by the view close (termux_control remove_float_win)",
        # a small card at the screen's edge, not a modal: the home stays usable around it
        f'<div class="rb-float" id="rb_ccb_float_window" role="note">'
        f'<div class="rb-float-art" aria-label="活动入口">龙支付</div>'
        f'<button class="rb-corner-close" id="close" aria-label="关闭" data-ev="{_DISMISS}" '
        f'data-arg="ccb_float_window">×</button></div>',
    ),
    Interruption(
        "ccb_bankcard_prompt",
        "[script] a dialog with a node whose text is exactly 是否需要向银行卡, closed by btn_cancel "
        "(termux_control remove_float_win); the rest of its wording and its other button are guesses",
        f'<div class="modal" id="rb_ccb_bankcard_prompt"><div class="dialog" role="dialog">'
        f'<div class="dialog-title">温馨提示</div>'
        f'<div class="dialog-body"><div class="rb-line">是否需要向银行卡</div>'
        f'<div class="rb-line">绑定的手机号发送动账通知？</div></div>'
        f'<div class="dialog-actions">{_button("取消", "btn_cancel", "ccb_bankcard_prompt")}'
        f"{_button('去开通', 'btn_bankcard_go', 'ccb_bankcard_prompt')}</div></div></div>",
    ),
    Interruption(
        "ccb_id_expiry",
        "[script] the ID-expiry notice (its whole text) closed by btn_cancel (termux_control login); "
        "its title and the other button are guesses",
        _dialog(
            "ccb_id_expiry",
            "温馨提示",
            ID_EXPIRY_TEXT,
            [("取消", "btn_cancel"), ("去更新", "btn_id_update")],
        ),
    ),
    Interruption(
        "ccb_update",
        "[rules] an update dialog: text with 新版本 inside dialog_content_scroll, dlg_left_tv 取消 and "
        "dlg_right_tv 去更新 (GKD)",
        f'<div class="modal" id="rb_ccb_update"><div class="dialog" role="dialog">'
        f'<div class="dialog-title">版本更新</div>'
        f'<div class="dialog-body scroll" id="dialog_content_scroll"><div class="rb-line">'
        f"发现新版本，更新后可体验更多功能。</div></div>"
        f'<div class="dialog-actions">{_button("取消", "dlg_left_tv", "ccb_update")}'
        f"{_button('去更新', 'dlg_right_tv', 'ccb_update')}</div></div></div>",
    ),
    Interruption(
        "ccb_storage_permission",
        "[rules] a storage-permission dialog: tv_dlg_content containing 存储, closed by dlg_left_tv (GKD)",
        f'<div class="modal" id="rb_ccb_storage_permission"><div class="dialog" role="dialog">'
        f'<div class="dialog-body" id="tv_dlg_content">为保存电子回单，需要获取存储权限。</div>'
        f'<div class="dialog-actions">{_button("取消", "dlg_left_tv", "ccb_storage_permission")}'
        f"{_button('去设置', 'btn_storage_go', 'ccb_storage_permission')}</div></div></div>",
    ),
)

CATALOGUE: dict[str, tuple[Interruption, ...]] = {"train_ticketing": TRAIN_TICKETING, "bank": BANK}


def interruptions_of(clone_name: str) -> dict[str, Interruption]:
    return {i.name: i for i in CATALOGUE.get(clone_name, ())}
