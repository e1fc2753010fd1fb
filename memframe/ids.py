"""Capsule and session ids: one parser for the whole package.

Ids count per kind (``cap-<n>``, ``sess-<n>``): ``n`` is written in ASCII digits, is at
least 1 and never has a leading zero. Anything else (``cap-01``, ``cap-٣`` in Arabic-Indic
digits, ``cap-²``, ``cap-1 ``) is not an id of this store, so a verb that names it is
refused rather than silently mapped to another capsule.

The same rule is available for one string (`capsule_number`) and for a whole column
(`capsule_number_expr`), so the write path, the digest and the importer cannot disagree.
"""

from __future__ import annotations

import functools
import re

import polars as pl

__all__ = [
    "CAPSULE_PREFIX",
    "SESSION_PREFIX",
    "capsule_id",
    "capsule_number",
    "capsule_number_expr",
    "session_number",
    "session_number_expr",
    "SESSION_PATTERN",
    "SESSION_ID_RULE",
]

CAPSULE_PREFIX = "cap-"
SESSION_PREFIX = "sess-"

# [0-9] rather than \d: \d matches every Unicode decimal digit
_NUMBER = r"[1-9][0-9]{0,17}"
_CAPSULE_RE = re.compile(rf"cap-({_NUMBER})")
_SESSION_RE = re.compile(rf"sess-({_NUMBER})")
_CAPSULE_PATTERN = rf"^cap-{_NUMBER}$"
#: a whole column of session ids is checked with this pattern (the schema, the importer)
SESSION_PATTERN = rf"^sess-{_NUMBER}$"
#: what a session id is, for error messages that teach it
SESSION_ID_RULE = ("session ids are 'sess-<n>' with n a whole number from 1, in ASCII "
                   "digits without leading zeros (e.g. 'sess-12')")


def capsule_number(value: object) -> int | None:
    """The ``n`` of a canonical ``cap-<n>`` id, or None for anything else.

    Examples:
        >>> capsule_number("cap-12")
        12
        >>> [capsule_number(v) for v in ("cap-012", "cap-0", "cap-\u0661", "cap-\u00b2", 5)]
        [None, None, None, None, None]
    """
    if not isinstance(value, str):
        return None
    m = _CAPSULE_RE.fullmatch(value)
    return int(m.group(1)) if m else None


def session_number(value: object) -> int | None:
    """The ``n`` of a canonical ``sess-<n>`` id, or None for anything else.

    Examples:
        >>> session_number("sess-3"), session_number("sess-03"), session_number("sess-x")
        (3, None, None)
    """
    if not isinstance(value, str):
        return None
    m = _SESSION_RE.fullmatch(value)
    return int(m.group(1)) if m else None


def session_number_expr(expr: pl.Expr | str) -> pl.Expr:
    """`session_number` as a Polars expression: Int64, null for anything not ``sess-<n>``.

    Examples:
        >>> import polars as pl
        >>> ids = pl.Series(["sess-3", "sess-03", "sess-", "sess-abc", None])
        >>> pl.select(session_number_expr(pl.lit(ids))).to_series().to_list()
        [3, None, None, None, None]
    """
    text = pl.col(expr) if isinstance(expr, str) else expr
    return (
        pl.when(text.str.contains(SESSION_PATTERN))
        .then(text.str.strip_prefix(SESSION_PREFIX).cast(pl.Int64, strict=False))
        .otherwise(None)
        .cast(pl.Int64)
    )


def capsule_id(number: int) -> str:
    """The id of the ``number``-th capsule.

    Examples:
        >>> capsule_id(7)
        'cap-7'
    """
    return f"{CAPSULE_PREFIX}{number}"


def capsule_number_expr(expr: pl.Expr | str) -> pl.Expr:
    """`capsule_number` as a Polars expression: Int64, null for anything not ``cap-<n>``.

    Examples:
        >>> import polars as pl
        >>> pl.select(capsule_number_expr(pl.lit(pl.Series(["cap-3", "cap-03", "x"])))).to_series().to_list()
        [3, None, None]
    """
    if isinstance(expr, str):
        return _number_of_column(expr)
    canonical = expr.str.contains(_CAPSULE_PATTERN)
    return (
        pl.when(canonical)
        .then(expr.str.strip_prefix(CAPSULE_PREFIX).cast(pl.Int64, strict=False))
        .otherwise(None)
        .cast(pl.Int64)
    )


@functools.cache
def _number_of_column(name: str) -> pl.Expr:
    return capsule_number_expr(pl.col(name))
