"""Frame helpers that any layer may use: no I/O, no store."""

from __future__ import annotations

from typing import cast

import polars as pl

__all__ = ["own", "slice_between", "strictly_increasing"]


def own(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` in buffers of its own. A filtered or gathered frame shares the text
    buffers of the frame it was taken from: the few rows kept of a large frame would keep
    all of its text alive.

    Examples:
        >>> big = pl.DataFrame({"t": ["x" * 100] * 1000})
        >>> own(big.head(2)).estimated_size() < big.estimated_size()
        True
    """
    copied = cast(pl.DataFrame, pl.from_arrow(frame.to_arrow()))
    return copied.cast(frame.schema)


def slice_between(frame: pl.DataFrame, column: str, lo: int | None, hi: int | None
                  ) -> pl.DataFrame:
    """The rows of ``frame`` (sorted by ``column``) whose ``column`` is in ``[lo, hi)``
    (None: unbounded), as a zero-copy slice.

    Examples:
        >>> slice_between(pl.DataFrame({"n": [1, 2, 3, 5]}), "n", 2, 5)["n"].to_list()
        [2, 3]
    """
    values = frame.get_column(column)
    start = 0 if lo is None else int(values.search_sorted(lo, side="left"))
    end = frame.height if hi is None else int(values.search_sorted(hi, side="left"))
    return frame.slice(start, max(end - start, 0))


def strictly_increasing(values: pl.Series) -> bool:
    """Whether ``values`` are integers, none null, each greater than the one before: then
    sorting by them is the identity, whatever the sort's tie order, and a sort (a copy of
    every column) can be skipped.

    Examples:
        >>> [strictly_increasing(pl.Series(v)) for v in ([1, 2, 5], [1, 1, 2], [2, 1], [1, None])]
        [True, False, False, False]
        >>> strictly_increasing(pl.Series(["a", "b"])), strictly_increasing(pl.Series([], dtype=pl.Int64))
        (False, True)
    """
    if not values.dtype.is_integer() or values.null_count():
        return False
    return bool((values.diff(null_behavior="drop") > 0).all())
