"""Frame helpers that any layer may use: no I/O, no store."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, cast

import polars as pl

from memframe.text import rfc3339

__all__ = ["json_records", "own", "records_json", "records_json_pieces", "slice_between",
           "sorted_by_columns", "strictly_increasing"]


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


def sorted_by_columns(frame: pl.DataFrame, *by: str | pl.Expr) -> pl.DataFrame:
    """``frame.sort(*by, maintain_order=True)``, copying one column at a time: the order
    is computed once (an index per row), then each column is gathered and its old buffers
    let go before the next, so a wide frame of millions of rows is not held twice. Give
    ``frame`` as its only reference (``f = sorted_by_columns(f, ...)``) for the saving to
    hold.

    Examples:
        >>> f = pl.DataFrame({"k": [3, 1, 2], "v": ["c", "a", "b"]})
        >>> sorted_by_columns(f, "k").equals(f.sort("k"))
        True
    """
    order = (frame.select(pl.arg_sort_by(list(by), maintain_order=True).alias("_order"))
             .get_column("_order"))
    names = frame.columns
    columns: list[pl.Series] = []
    for name in names:
        columns.append(frame.get_column(name).gather(order))
        frame = frame.drop(name)
    return pl.DataFrame(columns)


def json_records(frame: pl.DataFrame) -> list[dict[str, Any]]:
    """Rows as JSON-ready dicts: datetimes as RFC3339 text, dates as ISO dates.

    Examples:
        >>> import datetime as dt
        >>> json_records(pl.DataFrame({"d": [dt.date(2026, 1, 2)], "n": [1]}))
        [{'d': '2026-01-02', 'n': 1}]
    """
    exprs = []
    for name, dtype in frame.schema.items():
        if isinstance(dtype, pl.Datetime):
            exprs.append(rfc3339(pl.col(name)).alias(name))
        elif dtype == pl.Date:
            exprs.append(pl.col(name).dt.strftime("%Y-%m-%d").alias(name))
        else:
            exprs.append(pl.col(name))
    return frame.select(exprs).to_dicts() if exprs else []


#: rows rendered to JSON at a time (`records_json`)
JSON_ROWS = 100_000


def records_json(frame: pl.DataFrame) -> str:
    """``json.dumps(json_records(frame))`` (compact, not ASCII-escaped), rendered
    `JSON_ROWS` rows at a time: a frame of millions of rows never becomes as many dicts
    at once.

    Examples:
        >>> records_json(pl.DataFrame({"a": [1, 2], "b": ["x", None]}))
        '[{"a":1,"b":"x"},{"a":2,"b":null}]'
    """
    return "".join(records_json_pieces(frame))


def records_json_pieces(frame: pl.DataFrame) -> Iterator[str]:
    """`records_json` in pieces of `JSON_ROWS` rows (their concatenation is its text),
    for a writer that never holds the whole text."""
    yield "["
    for i in range(0, frame.height, JSON_ROWS):
        piece = json.dumps(json_records(frame.slice(i, JSON_ROWS)), ensure_ascii=False,
                           separators=(",", ":"))[1:-1]
        yield piece if i == 0 else "," + piece
    yield "]"
