"""What a writer stages is checked before anything is written or linked.

Regression tests: ``write_derived`` once took any table name (a canonical table's was
replaced; a name the log refuses was linked first and bricked the store), ``set_watermark``
took any name and value, and ``append_rows`` read a dict of columns as one capsule row.
"""

from __future__ import annotations

import math

import polars as pl
import pyarrow.parquet as pq
import pytest

import memframe as mf
from memframe.errors import InvalidInputError
from tests.store.test_faults import state_of


def seeded(store: mf.Store) -> mf.Store:
    store.ingest([{"content": t, "source": "s", "anchor": t, "conversation_id": "c"}
                  for t in "ab"])
    store.memory.run_cycle()
    return store


def still_works(store: mf.Store) -> None:
    """The store opens, reads, digests, ingests and runs its jobs as before."""
    again = mf.Store.open(store.path)
    assert again.table("capsules").collect().height >= 2
    assert mf.digest(again).to_dict()["total"] >= 2
    again.ingest({"content": "after", "source": "s", "anchor": "z", "conversation_id": "c"})
    again.memory.run_cycle()
    assert again.memory.sessions().rows["memory_count"].to_list() == [3]


@pytest.mark.parametrize("name", ["capsules", "journal", "projections/../capsules",
                                  "Projections/x", "projections/x y", "projections",
                                  "derived/", "/tmp/x", "projections/" + "x" * 300, 5, None,
                                  "capsules/extra", "other/x"])
def test_write_derived_refuses_a_name_outside_the_derived_roots(store, name):
    seeded(store)
    before = state_of(store)
    with pytest.raises(InvalidInputError, match="derived table"):
        store.commit(lambda w: w.write_derived(name, pl.DataFrame({"x": [1]}), replace=True),
                     operation="mine")
    assert state_of(store) == before
    still_works(store)


@pytest.mark.parametrize("kwargs", [{"frame": [1, 2]}, {"replace": "yes"},
                                    {"row_group_rows": 0}, {"row_group_rows": 1.5},
                                    {"row_group_rows": ()}, {"row_group_rows": (16, 0)},
                                    {"row_group_rows": (2, True)}, {"row_group_rows": [2, 4]}])
def test_write_derived_refuses_odd_arguments(store, kwargs):
    seeded(store)
    before = state_of(store)
    args = {"frame": pl.DataFrame({"x": [1]}), "replace": True, **kwargs}
    with pytest.raises(InvalidInputError, match="write_derived"):
        store.commit(lambda w: w.write_derived("projections/mine", args.pop("frame"), **args),
                     operation="mine")
    assert state_of(store) == before


def test_write_derived_still_lands_a_derived_table(store):
    seeded(store)
    store.commit(lambda w: w.write_derived("projections/mine", pl.DataFrame({"x": [1, 2]}),
                                           replace=True), operation="mine")
    assert store.derived("projections/mine", pl.Schema({"x": pl.Int64})).collect().height == 2


def test_write_derived_lands_the_row_groups_asked_for(store):
    """Row groups of the sizes given, the last size repeated for the rest."""
    seeded(store)
    rows = pl.DataFrame({"x": list(range(50))})
    store.commit(lambda w: w.write_derived("projections/mine", rows, replace=True,
                                           row_group_rows=(4, 8, 16)), operation="mine")
    [part] = store.pinned().partitions("projections/mine")
    meta = pq.ParquetFile(store.path / part.path).metadata
    assert [meta.row_group(g).num_rows for g in range(meta.num_row_groups)] == [4, 8, 16, 16, 6]
    got = store.derived("projections/mine", pl.Schema({"x": pl.Int64})).collect()
    assert got.equals(rows)


@pytest.mark.parametrize("name,value", [
    ("projections/session", "12"), ("projections/session", -1), ("projections/session", True),
    ("projections/session", 1.5), ("projections/session", None), ("projections/session", 2**64),
    ("mine", {"x": math.inf}), ("mine", {"x": math.nan}), ("mine", {"x": object()}),
    ("mine", {1: 2}), ("mine", {"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": 1}}}}}}}}),
    ("mine", {"x": list(range(20_000))}), (None, 1), ("", 1), ("a b", 1), ("../x", 1),
    ("x\x1b]0;t\x07", 1),
])
def test_set_watermark_refuses_what_no_job_reads(store, name, value):
    seeded(store)
    before = state_of(store)
    with pytest.raises(InvalidInputError, match="set_watermark"):
        store.commit(lambda w: w.set_watermark(name, value), operation="mine")
    assert state_of(store) == before
    still_works(store)


def test_set_watermark_takes_numbers_and_json_objects(store):
    seeded(store)
    store.commit(lambda w: (w.set_watermark("mine", 3),
                            w.set_watermark("mine/state@2", {"seq": 3, "seal": {"h": "ab"},
                                                             "parts": [1, 2.5, None, True]})),
                 operation="mine")
    assert mf.Store.open(store.path).watermarks["mine/state@2"]["parts"] == [1, 2.5, None, True]


@pytest.mark.parametrize("rows", [
    {"capsule_id": ["cap-1", "cap-2", "cap-1"]},
    [{"capsule_id": "cap-1"}, {"capsule_id": "cap-2"}, {"capsule_id": "cap-1"}],
    pl.DataFrame({"capsule_id": ["cap-1", "cap-2", "cap-1"]}),
])
def test_append_rows_reads_columns_as_the_bulk_form_does(store, rows):
    seeded(store)
    assert store.commit(lambda w: w.append_rows("recalls", rows), operation="mine") == 3
    counts = dict(store.capsule_state().select("id", "recall_count").collect().iter_rows())
    assert counts == {"cap-1": 2, "cap-2": 1}


@pytest.mark.parametrize("table,rows", [
    ("capsules", {"content": ["x"]}),
    ("recalls", {"capsule_id": "cap-1"}),
    ("recalls", {"capsule_id": ["cap-1"], "count": [1, 2]}),
    ("recalls", "cap-1"),
    ("recalls", [{"capsule_id": "cap-1"}, "cap-2"]),
    ("recalls", {"content": ["x"]}),
])
def test_append_rows_refuses_rows_it_cannot_read(store, table, rows):
    seeded(store)
    before = state_of(store)
    with pytest.raises(InvalidInputError):
        store.commit(lambda w: w.append_rows(table, rows), operation="mine")
    with pytest.raises(InvalidInputError):
        store.append(table, rows)
    assert state_of(store) == before


def test_constant_columns_keep_their_type_whatever_equal_values_came_before() -> None:
    """`constant` keeps the one-row series it repeats, keyed by value and type: values
    equal in Python (1, 1.0, True; aware instants in two zones) must still come back in
    the type asked, with the value given."""
    import datetime as dt

    from memframe.store.tables import constant

    asked = [(1, pl.Int64), (1.0, pl.Float64), (True, pl.Boolean), (1, pl.Float64),
             (True, pl.Int64), ("1", pl.String), (None, pl.String), (None, pl.Int64)]
    for value, dtype in asked + asked[::-1]:
        got = constant(value, 3, dtype)
        assert got.dtype == dtype and got.len() == 3
        assert got.to_list() == pl.Series([value], dtype=dtype).to_list() * 3
    utc = dt.datetime(2026, 1, 1, 12, tzinfo=dt.UTC)
    paris = utc.astimezone(dt.timezone(dt.timedelta(hours=1)))
    for moment in (utc, paris):
        got = constant(moment, 2, pl.Datetime("ns", "UTC"))
        assert got.to_list() == [utc, utc] and got.dtype == pl.Datetime("ns", "UTC")
    assert constant([1, 2], 2, pl.List(pl.Int64)).to_list() == [[1, 2], [1, 2]]  # unhashable


def test_validation_puts_columns_in_the_table_order() -> None:
    import datetime as dt

    from memframe.schema import table_schema, validate_frame

    schema = table_schema("pins")
    row = {"seq": 1, "at": dt.datetime(2026, 1, 1, tzinfo=dt.UTC), "capsule_id": "cap-1",
           "pinned": True, "reason": "keep", "actor": "me"}
    full = pl.DataFrame([{c: row.get(c) for c in schema}], schema=schema)
    shuffled = full.select(list(reversed(full.columns)))
    assert validate_frame("pins", shuffled).columns == list(schema)
    assert validate_frame("pins", full).equals(full)
