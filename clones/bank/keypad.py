"""The bank's own keyboard: passwords and verification codes are typed by tapping its keys.

Public scripts that drive the real app type the login password by tapping nodes whose text is
the character (`大小写转换` switches case) and enter codes on the verification page through
keys with ids such as `default_row_two_1` and `default_row_four_delete` (REAL_APPS.md section 2b,
[script]). Each key appends to the field the current screen edits; typing into the field
directly (as a plan or `send_keys` does) still works, as it does on the real page.
"""

from __future__ import annotations

from clones.bank.handler_kit import arg, on
from clones.base import State, UIEvent, require

LETTER_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
DIGITS = "1234567890"
# The verification keypad: rows of three digits, ids as the scripts name them (one to four)
ROW_NAMES = ("one", "two", "three", "four")
DIGIT_ROWS = (("1", "2", "3"), ("4", "5", "6"), ("7", "8", "9"))
MAX_LEN = 20


def target_field(state: State) -> str | None:
    """The form field the keypad types into on this screen (None: no keypad here)."""
    route = state["ui"]["route"]
    if route == "login":
        return "password"
    if route == "secure_verify":
        pending = state["ui"].get("pending") or {}
        return "tx_password" if pending.get("sms_verified") else "sms_code"
    return None


def _field(state: State) -> str:
    name = target_field(state)
    require(name is not None, "当前页面没有安全键盘")
    return name  # type: ignore[return-value]


@on("kp")
def _key(state: State, event: UIEvent) -> None:
    name = _field(state)
    ch = arg(event)
    require(len(ch) == 1 and ch.isalnum(), "无效的按键")
    if state["ui"].get("kp_upper"):
        ch = ch.upper()
    form = state["ui"]["form"]
    value = str(form.get(name, "") or "")
    if len(value) < MAX_LEN:
        form[name] = value + ch


@on("kp_delete")
def _delete(state: State, event: UIEvent) -> None:
    name = _field(state)
    form = state["ui"]["form"]
    form[name] = str(form.get(name, "") or "")[:-1]


@on("kp_shift")
def _shift(state: State, event: UIEvent) -> None:
    _field(state)
    state["ui"]["kp_upper"] = not state["ui"].get("kp_upper")
