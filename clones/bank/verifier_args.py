"""The argument models of the bank clone's verifiers (what `check-pack` validates each task against).

Amounts are yuan as written in a pack (an int, a float or text such as "1,200.50"); account tails,
account numbers and phone numbers are text even where YAML would read them as numbers.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, StrictBool, model_validator

from clones.contracts import VerifierArgs


def _digits_as_text(value: Any) -> Any:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


Text = Annotated[str, BeforeValidator(_digits_as_text)]
Amount = Annotated[int | float | str, Field(union_mode="left_to_right")]

Query = Literal[
    "balance",
    "total_assets",
    "history_sum",
    "history_count",
    "last_txn_amount",
    "last_txn_date",
    "last_txn_party",
    "credit_bill",
    "credit_min",
    "credit_due_date",
    "credit_available",
    "credit_unbilled",
    "credit_days_left",
    "payee_tail",
    "payee_bank",
    "sub_maturity",
    "sub_principal",
    "deposit_rate",
    "fund_nav",
    "fund_return",
    "best_fund",
    "fund_count",
    "fx_rate",
    "fx_convert",
    "nearest_branch",
    "branch_phone",
    "branch_queue",
    "unread_count",
    "single_limit",
    "daily_limit",
    "bill_due",
    "risk_level",
    "scheduled_day",
]


class AnswerArgs(VerifierArgs):
    """A look-up question (``query``) and what it is about; the answer's type is the task's."""

    query: Query
    acc_tail: Text | None = None
    # transaction-history filters
    period: Literal["week", "month", "3months", "this_month", "last_month"] | None = None
    start: str | None = None
    end: str | None = None
    direction: Literal["all", "in", "out", "buy", "sell"] | None = None  # history filter, or FX side
    cat: str | None = None
    party: str | None = None
    min: Amount | None = None
    max: Amount | None = None
    # what the question names
    payee: str | None = None
    product: str | None = None
    fund: str | None = None
    risk: str | None = None
    code: str | None = None
    side: Literal["buy_spot", "sell_spot", "buy_cash", "sell_cash"] | None = None
    amount: Amount | None = None
    weekend: StrictBool | None = None
    branch: str | None = None
    kind: str | None = None
    account_no: Text | None = None


class _FromAccount(VerifierArgs):
    from_tail: Text | None = None


class TransferArgs(_FromAccount):
    payee: str | None = None
    amount: Amount
    account_no: Text | None = None
    bank: str | None = None
    note: str | None = None
    arrival: Literal["realtime", "2h", "nextday"] | None = None
    when: Literal["now", "date", "monthly"] = "now"
    date: str | None = None
    day: int | None = None
    times: int | None = None
    save_payee: StrictBool = False
    # "send another to whoever I last paid from the card ending ..."
    payee_of_last_transfer: Text | None = None

    @model_validator(mode="after")
    def _payee_named(self) -> TransferArgs:
        if self.payee is None and self.payee_of_last_transfer is None:
            raise ValueError("a transfer names its payee (or payee_of_last_transfer)")
        if self.when == "date" and self.date is None:
            raise ValueError("a transfer on a date needs `date`")
        if self.when == "monthly" and self.day is None:
            raise ValueError("a monthly transfer needs `day`")
        return self


class RepayArgs(_FromAccount):
    option: Literal["full", "min", "custom"] | None = None
    amount: Amount | None = None

    @model_validator(mode="after")
    def _amount_or_option(self) -> RepayArgs:
        if self.option not in ("full", "min") and self.amount is None:
            raise ValueError("a repayment needs `option` full or min, or an `amount`")
        return self


class InstallmentArgs(VerifierArgs):
    periods: int


class BillArgs(_FromAccount):
    kind: str
    account_no: Text
    amount: Amount | None = None


class TopupArgs(VerifierArgs):
    phone: Text
    amount: Amount


class DepositArgs(_FromAccount):
    product: str
    amount: Amount
    rollover: StrictBool | None = None


class FundArgs(_FromAccount):
    fund: str | None = None
    risk: str | None = None
    amount: Amount

    @model_validator(mode="after")
    def _fund_or_risk(self) -> FundArgs:
        if self.fund is None and self.risk is None:
            raise ValueError("a fund purchase names the `fund` (or the `risk` level of the best one)")
        return self


class LimitArgs(VerifierArgs):
    single: Amount | None = None
    daily: Amount | None = None


class PayeeAddedArgs(VerifierArgs):
    name: str
    account_no: Text
    bank: str
    alias: str | None = None


class PayeeDeletedArgs(VerifierArgs):
    name: str


class PayeeAliasArgs(VerifierArgs):
    name: str
    alias: str


class NotifyArgs(VerifierArgs):
    key: Literal["txn", "login", "credit", "marketing"]
    value: StrictBool


class SwitchArgs(VerifierArgs):
    value: StrictBool


class LoginArgs(VerifierArgs):
    require_declined: StrictBool = False


# Services a logged-out user can ask for from the home tab (their screens, as the clone names them).
Service = Literal[
    "accounts",
    "history",
    "transfer_home",
    "transfer_records",
    "payees",
    "credit_home",
    "wealth_home",
    "pay_home",
    "topup",
    "deposit_home",
    "fund_list",
    "mine",
    "messages",
]


class LoginOnDemandArgs(VerifierArgs):
    """Logged in from the logged-out home and landed on the service that was asked for."""

    landed: Service


class RiskTestArgs(VerifierArgs):
    answers: str = Field(pattern=r"^\d+(,\d+)*$")


class AppointmentArgs(VerifierArgs):
    branch: str
    service: str
    date: str
    slot: str


class ScheduledCancelledArgs(VerifierArgs):
    payee: str


class DefaultAccountArgs(VerifierArgs):
    acc_tail: Text
