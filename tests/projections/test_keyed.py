"""Versioned runs (`memframe.derived.keyed`): a key's current row is its newest
version, however the versions are spread over runs and merges."""

from __future__ import annotations

import tempfile
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memframe as mf
from memframe.derived import keyed, runs

SCHEMA = pl.Schema({"k": pl.Int64(), "v": pl.String()})


@given(st.lists(st.tuples(st.integers(0, 8), st.integers(0, 30)), max_size=30,
                unique=True))
def test_newest_rows_keeps_each_keys_highest_version(pairs):
    rows = pl.DataFrame({"k": [k for k, _ in pairs], "v": [f"{k}@{n}" for k, n in pairs],
                         keyed.VERSION: [n for _, n in pairs]},
                        schema={"k": pl.Int64, "v": pl.String, keyed.VERSION: pl.Int64})
    want = {}
    for k, n in pairs:
        want[k] = max(want.get(k, -1), n)
    got = keyed.newest_rows(rows, "k")
    assert sorted(got.select("k", keyed.VERSION).rows()) == sorted(want.items())
    assert all(v == f"{k}@{n}" for k, v, n in got.rows())


writes = st.lists(st.lists(st.tuples(st.integers(0, 12), st.text("abc", max_size=2)),
                           min_size=1, max_size=6), min_size=1, max_size=14)


@pytest.mark.parametrize("each", [False, True], ids=["one-filter", "filter-per-group"])
@pytest.mark.parametrize("tiny", [False, True], ids=["default", "tiny-tiers"])
def test_stored_rows_are_the_last_write_of_each_key(tiny, each):
    """Put batches of rows (a key at most once per batch), with merges a chunk at a time:
    every key reads back as its last write, by lookup and in full, at every step. A
    lookup filters its pieces once, or each group as it reads it (a large read: here
    every read, so that path meets merges in progress too)."""
    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(batches=writes)
    def law(batches):
        projection = keyed.KeyedRuns("projections/example", SCHEMA, "k", row_group_rows=2)
        with tempfile.TemporaryDirectory() as tmp:
            store = mf.Store.create(Path(tmp) / "s")
            model: dict[int, str] = {}
            for version, batch in enumerate(batches, start=1):
                last = dict(batch)  # one row per key in a batch: its last value
                rows = pl.DataFrame({"k": list(last), "v": list(last.values())},
                                    schema=SCHEMA)
                store.commit(lambda c, rows=rows, version=version: projection.stage_put(
                    c, c.view, rows, version, runs.Budget(3)), operation="example")
                model.update(last)
                view = store.pinned()
                every, _ = projection.read_all(view)
                assert dict(every.rows()) == model
                keys = sorted(model)[::2]
                some, _ = projection.read_keys(view, keys)
                assert dict(some.rows()) == {k: model[k] for k in keys}

    with pytest.MonkeyPatch.context() as mp:
        if tiny:
            mp.setattr(runs, "TIER_RUNS", 2)
            mp.setattr(runs, "BASE_RUN", 2)
        mp.setattr(runs, "FILTER_EACH_FROM_ROWS", 0 if each else 1 << 62)
        law()
