"""Whole numbers as Argo's Go code reads them from text: strconv.Atoi, which util/intstr.Int applies to an
int-or-string field (a retry limit, a deadline) and wfv1.ParseStringToDuration tries before a duration."""

from __future__ import annotations

import re

ATOI = re.compile(r"[+-]?[0-9]+")  # ASCII digits only, no spaces, no underscores
INT64 = range(-(2**63), 2**63)


def atoi(text: str) -> int | None:
    """Go's strconv.Atoi: an optional sign and decimal digits within int64; None for anything else."""
    if ATOI.fullmatch(text) is None:
        return None
    number = int(text)
    return number if number in INT64 else None
