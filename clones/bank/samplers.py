"""Task parameters drawn from the bank clone's start state (see `realbench.state_params`): a payee
that is on the account's payee list, an amount the default account can send today (within its
balance, less the fee, and the single and daily transfer limits)."""

from __future__ import annotations

from datetime import date
from typing import Any

import numpy as np
from pydantic import Field, model_validator

from clones.bank import queries as q
from realbench.state_params import NothingToSample, SamplerArgs, StateSamplerSet

State = dict[str, Any]

SAMPLERS = StateSamplerSet()


class PayeeArgs(SamplerArgs):
    """A saved payee (收款人名册)."""

    banks: list[str] | None = Field(default=None, description="bank codes to draw from (SELF: this bank)")
    exclude: list[str] = Field(default_factory=list, description="names not to draw")


@SAMPLERS.sampler("payee", args=PayeeArgs, fields=("name", "bank", "tail"))
def sample_payee(state: State, args: PayeeArgs, rng: np.random.Generator, today: date) -> dict[str, Any]:
    rows = [
        p
        for p in state["user"]["payees"]
        if p["name"] not in args.exclude and (args.banks is None or p["bank"] in args.banks)
    ]
    if not rows:
        raise NothingToSample(f"the payee list has no payee of banks {args.banks} outside {args.exclude}")
    row = rows[int(rng.integers(len(rows)))]
    return {"name": row["name"], "bank": row["bank"], "tail": row["account_no"][-4:]}


class AmountArgs(SamplerArgs):
    """Whole yuan between `min` and `max` that the default account can send now."""

    min: int = Field(ge=1)
    max: int = Field(ge=1)

    @model_validator(mode="after")
    def _ordered(self) -> AmountArgs:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) is greater than max ({self.max})")
        return self


@SAMPLERS.sampler("transfer_amount", args=AmountArgs, fields=("yuan",))
def sample_transfer_amount(
    state: State, args: AmountArgs, rng: np.random.Generator, today: date
) -> dict[str, Any]:
    account = next(a for a in state["user"]["accounts"] if a.get("default"))
    settings = state["user"]["settings"]
    # a whole-yuan cap that leaves room for the largest inter-bank fee the clone charges
    room_fen = min(
        account["balance_fen"] - q.transfer_fee_fen(account["balance_fen"], "ICBC", "realtime"),
        settings["single_limit_fen"],
        settings["daily_limit_fen"] - q.out_today_fen(state),
    )
    top = min(args.max, room_fen // 100)
    if top < args.min:
        raise NothingToSample(f"the default account can send at most {room_fen / 100:.2f} yuan now")
    return {"yuan": int(rng.integers(args.min, top + 1))}
