"""Typed Python values out of Polars scalars.

``Series.max()``, ``Series.min()`` and ``DataFrame.item()`` are typed as any Python literal
a column can hold (or None); the caller knows the column's dtype. These helpers check that
knowledge at run time and hand the type checker the narrow type, instead of ``int(...)`` on
a value that could in principle be text or a date.
"""

from __future__ import annotations

import datetime as _dt

__all__ = ["as_date", "as_float", "as_int"]


def as_int(value: object) -> int:
    """``value`` (a scalar of an integer or boolean column) as an ``int``.

    Examples:
        >>> import polars as pl
        >>> as_int(pl.Series([3, 9]).max())
        9
        >>> as_int(pl.Series([], dtype=pl.Int64).max() or 0)
        0
        >>> as_int("7")
        Traceback (most recent call last):
        ...
        TypeError: expected an integer scalar, got '7'
    """
    if isinstance(value, int):  # bool included: a sum of flags
        return int(value)
    raise TypeError(f"expected an integer scalar, got {value!r}")


def as_float(value: object) -> float:
    """``value`` (a scalar of a numeric column) as a ``float``.

    Examples:
        >>> as_float(2), as_float(0.5)
        (2.0, 0.5)
    """
    if isinstance(value, int | float):
        return float(value)
    raise TypeError(f"expected a numeric scalar, got {value!r}")


def as_date(value: object) -> _dt.date:
    """``value`` (a scalar of a ``Date`` column, not null) as a ``datetime.date``.

    Examples:
        >>> import datetime as dt, polars as pl
        >>> as_date(pl.Series([dt.date(2026, 1, 2)]).min())
        datetime.date(2026, 1, 2)
    """
    if isinstance(value, _dt.date):
        return value
    raise TypeError(f"expected a date scalar, got {value!r}")
