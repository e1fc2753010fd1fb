"""rebuild_sessions on Ray Data: the same rows and hashes as the local rebuild door."""

from __future__ import annotations

import datetime as dt
import sys

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memframe as mf
from memframe import distributed
from memframe.errors import InvalidInputError, MemframeError, ReadOnlyStoreError
from memframe.projections.session import fold_sessions
from memframe.projections.session_rows import WATERMARK

from .conftest import T0, ingest_batch, many_partition_store, projection_rows

# one pytest worker holds the session's local Ray (tests/distributed/conftest.py): two
# workers would each start a cluster on the same machine
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("ray")]


def test_ray_rebuild_equals_local_rebuild_to_the_hash(tmp_path, ray_local):
    store = many_partition_store(tmp_path / "s")
    assert len(store.files("capsules")) >= 40  # many partitions: many blocks

    local = store.memory.rebuild_projections()
    local_rows = projection_rows(store)
    local_page = store.memory.session_digest(limit=1000)
    store.memory.rebuild_projections()  # (a second local rebuild changes nothing)
    assert projection_rows(store).equals(local_rows)

    report = distributed.rebuild_sessions(store, engine="ray")
    ray_rows = projection_rows(store)

    assert ray_rows.equals(local_rows)  # every column, hash included
    assert ray_rows["hash"].to_list() == local_rows["hash"].to_list()
    assert local_rows.height >= 17 and local_rows["summary"].null_count() < local_rows.height
    assert (report.rows_visited, report.rows_folded, report.rows_written, report.watermark) == (
        local.rows_visited, local.rows_folded, local.rows_written, local.watermark)
    assert report.generation == store.generation  # landed as one commit
    assert store.watermarks[WATERMARK] == local.watermark
    page = store.memory.session_digest(limit=1000)
    assert page.hash == local_page.hash
    assert page.rows.equals(local_page.rows)


def test_the_fold_really_runs_per_block(tmp_path, ray_local):
    store = many_partition_store(tmp_path / "s", commits=24, rows=30)
    files = [str(p) for p in store.files("capsules")]
    blocks = distributed._fold_on_ray(ray_local, files, False)
    assert len(blocks) > 1  # more than one partial: the merge is exercised
    per_block = sum(b.num_rows for b in blocks)
    merged = distributed.merge_blocks(blocks, store.table("summaries").collect())
    assert per_block > merged.filter(pl.col("memory_count") > 0).height
    store.memory.rebuild_projections()
    assert merged.equals(projection_rows(store))


def test_ray_rebuild_then_cycle_equals_local_rebuild(tmp_path, ray_local):
    """A Ray rebuild lands the pinned generation's watermark: later rows fold in by cycle."""
    store = many_partition_store(tmp_path / "s", commits=12, rows=40, seed=3)
    distributed.rebuild_sessions(store, engine="ray")
    import random

    rng = random.Random(11)
    for c in range(5):
        ingest_batch(store, rng, 25, f"late{c}")
    store.append("summaries", {"conversation_id": ["conv-03"], "summary": ["newest"]})
    store.memory.run_cycle()
    after_cycle = projection_rows(store)
    store.memory.rebuild_projections()
    assert after_cycle.equals(projection_rows(store))


def test_rows_committed_during_the_fold_are_left_to_the_next_cycle(tmp_path, ray_local,
                                                                   monkeypatch):
    store = many_partition_store(tmp_path / "s", commits=10, rows=30, seed=5)
    pinned_mark = max(p.seq_hi for p in [*store.snapshot.parts("capsules"),
                                         *store.snapshot.parts("summaries")])
    fold = distributed._fold_on_ray
    writer = mf.Store.open(store.path)

    def fold_while_another_writer_commits(*args):
        out = fold(*args)
        writer.ingest({"content": "late writer", "source": "s", "anchor": "w",
                       "conversation_id": "conv-01", "created_at": T0 + dt.timedelta(days=30)})
        return out

    monkeypatch.setattr(distributed, "_fold_on_ray", fold_while_another_writer_commits)
    report = distributed.rebuild_sessions(store, engine="ray")
    assert report.watermark == pinned_mark == store.watermarks[WATERMARK]
    row = projection_rows(store).filter(pl.col("conversation_id") == "conv-01")
    assert row["last_at"].item() < T0 + dt.timedelta(days=30)  # not folded yet
    store.memory.run_cycle()
    cycled = projection_rows(store)
    assert cycled.filter(pl.col("conversation_id") == "conv-01")["last_at"].item() == (
        T0 + dt.timedelta(days=30))
    store.memory.rebuild_projections()
    assert cycled.equals(projection_rows(store))


def test_empty_store_rebuilds_to_no_rows(tmp_path, ray_local):
    store = mf.Store.create(tmp_path / "s")
    local = store.memory.rebuild_projections()
    report = distributed.rebuild_sessions(str(store.path), engine="ray")
    assert report.rows_written == local.rows_written == 0
    assert projection_rows(store).height == 0


def test_local_engine_is_the_rebuild_door(tmp_path):
    store = many_partition_store(tmp_path / "s", commits=3, rows=20)
    report = distributed.rebuild_sessions(store, engine="local")
    assert report.rows_written == projection_rows(store).height > 0


def test_bad_engine_and_views_are_refused(tmp_path):
    store = many_partition_store(tmp_path / "s", commits=2, rows=10)
    with pytest.raises(InvalidInputError, match="ray, local"):
        distributed.rebuild_sessions(store, engine="spark")
    with pytest.raises(ReadOnlyStoreError, match="frozen view"):
        distributed.rebuild_sessions(store.at(1), engine="ray")
    with pytest.raises(InvalidInputError, match="num_cpus"):
        distributed.rebuild_sessions(store, engine="ray", num_cpus=0)


def test_without_ray_the_error_says_how_to_install_it(tmp_path, monkeypatch):
    store = many_partition_store(tmp_path / "s", commits=2, rows=10)
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(MemframeError, match=r'pip install "ray\[data\]>=2.30"'):
        distributed.rebuild_sessions(store, engine="ray")
    assert WATERMARK not in store.watermarks  # nothing was written


# ---- the merge, without Ray: any cut into blocks gives the one-pass fold -----------------

_capsule = st.tuples(
    st.integers(0, 5),  # conversation (5 = none)
    st.integers(0, 20),  # created_at, in minutes: many ties
    st.integers(0, 50),  # content_chars
)


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(_capsule, max_size=40), cuts=st.lists(st.integers(0, 40), max_size=6),
       summaries=st.lists(st.tuples(st.integers(0, 6), st.text(max_size=5)), max_size=5))
def test_merge_of_any_blocks_equals_one_fold(rows, cuts, summaries):
    caps = pl.DataFrame(
        {
            "id": [f"cap-{i + 1}" for i in range(len(rows))],
            "created_at": [T0 + dt.timedelta(minutes=m) for _, m, _ in rows],
            "content_chars": [c for *_, c in rows],
            "conversation_id": [None if k == 5 else f"k{k}" for k, _, _ in rows],
        },
        schema={"id": pl.String, "created_at": pl.Datetime("ns", "UTC"),
                "content_chars": pl.Int64, "conversation_id": pl.String},
    )
    sums = pl.DataFrame(
        {"seq": list(range(1, len(summaries) + 1)),
         "conversation_id": [f"k{k}" for k, _ in summaries],
         "summary": [s for _, s in summaries]},
        schema={"seq": pl.Int64, "conversation_id": pl.String, "summary": pl.String},
    )
    whole = fold_sessions(caps.lazy(), sums.lazy())
    edges = sorted({0, caps.height, *(min(c, caps.height) for c in cuts)})
    arrow = caps.to_arrow()
    blocks = [distributed.fold_block(arrow.slice(lo, hi - lo))
              for lo, hi in zip(edges, edges[1:], strict=False)]
    assert distributed.merge_blocks(blocks[::-1], sums).equals(whole)
