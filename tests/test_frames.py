"""The frame helpers any layer uses (`memframe.frames`)."""

from __future__ import annotations

import datetime as dt

import polars as pl
from hypothesis import given
from hypothesis import strategies as st

from memframe.frames import sorted_by_columns

rows = st.lists(st.tuples(st.integers(0, 4), st.integers(-3, 3), st.text(max_size=3),
                          st.none() | st.integers(0, 2)), max_size=40)


@given(rows)
def test_sorting_a_column_at_a_time_is_the_sort(values):
    frame = pl.DataFrame(values, schema={"at": pl.Int64, "n": pl.Int64, "text": pl.String,
                                         "maybe": pl.Int64}, orient="row")
    by = ("at", pl.col("n") * -1, "text")
    assert sorted_by_columns(frame.clone(), *by).equals(frame.sort(*by, maintain_order=True))


def test_the_dtypes_of_an_empty_frame_are_kept():
    frame = pl.DataFrame(schema={"created_at": pl.Datetime("ns", "UTC"), "id": pl.String})
    out = sorted_by_columns(frame, "created_at")
    assert out.schema == frame.schema and out.height == 0
    when = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    frame = pl.DataFrame({"created_at": [when, when - dt.timedelta(days=1)], "id": ["b", "a"]},
                         schema=frame.schema)
    assert sorted_by_columns(frame, "created_at")["id"].to_list() == ["a", "b"]
