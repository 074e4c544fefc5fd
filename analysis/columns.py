"""Column checks and parsing shared by the analysis tables."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from realbench.errors import AnalysisError


def check_columns(df: pd.DataFrame, required: tuple[str, ...], what: str) -> None:
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise AnalysisError(
            f"{what} table lacks columns {missing}",
            hint=f"a {what} table needs columns {', '.join(required)}",
        )


def parse_bool_column(s: pd.Series) -> pd.Series:
    """Parse a success/verdict column (bool, 0/1, 'true'/'false', missing) into a nullable boolean."""
    if s.dtype == bool:
        return s.astype("boolean")
    mapping = {
        "true": True,
        "false": False,
        "1": True,
        "0": False,
        "1.0": True,
        "0.0": False,
        "yes": True,
        "no": False,
    }

    def conv(v: Any) -> Any:
        if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA:
            return pd.NA
        if isinstance(v, bool | np.bool_):
            return bool(v)
        if isinstance(v, int | float | np.integer | np.floating):
            return bool(v)
        key = str(v).strip().lower()
        if key in ("", "nan", "none", "na", "<na>"):
            return pd.NA
        if key not in mapping:
            raise AnalysisError(f"cannot read {v!r} as a verdict", hint="use true/false, 1/0 or leave empty")
        return mapping[key]

    return s.map(conv).astype("boolean")
