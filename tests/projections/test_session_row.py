"""The session row: its terms (rules 3, 4, 6), its hash, and the fold's exactness."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import subprocess
import sys
import textwrap

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memframe.projections.session import SESSION_SCHEMA, canonical_line, fold_sessions
from tests.projections.helpers import at, caps, model_rows, stored_rows


def test_row_terms(mstore):
    a = mstore.ingest(caps([("c1", 10), ("c1", 5), ("c1", 30), ("c2", 1), (None, 50)]))
    mstore.memory.run_cycle()
    rows = stored_rows(mstore)
    assert rows.columns == list(SESSION_SCHEMA)
    assert rows["conversation_id"].to_list() == ["c1", "c2"]  # no-conversation capsule: no row
    c1 = rows.row(0, named=True)
    assert c1["first_at"] == at(5) and c1["last_at"] == at(30)
    assert c1["memory_count"] == 3
    chars = mstore.table("capsules").filter(pl.col("conversation_id") == "c1").select(
        pl.col("content_chars").sum()).collect().item()
    assert c1["content_chars"] == chars
    assert c1["last_member_id"] == a[2]
    assert c1["summary"] is None  # declared, never written by the fold
    assert rows.to_dicts() == model_rows(mstore)


def test_no_author_no_stability_no_live_count_in_the_row(mstore):
    mstore.ingest([{**r, "author": "alice"} for r in caps([("c", 1)])])
    mstore.memory.run_cycle()
    columns = set(stored_rows(mstore).columns)
    assert not columns & {"author", "authors", "stability", "live_count"}


def test_counts_are_historical_and_chars_survive_erasure(mstore):
    ids = mstore.ingest(caps([("c", 1), ("c", 2), ("c", 3)]))
    mstore.memory.run_cycle()
    before = stored_rows(mstore)
    mstore.forget(ids[0], "tombstone")
    mstore.forget(ids[1], "purge")
    assert mstore.table("capsules").filter(pl.col("id") == ids[1]).collect()["content"][0] is None
    mstore.ingest(caps([("c", 4)], tag="late"))
    mstore.memory.run_cycle()
    after = stored_rows(mstore).row(0, named=True)
    assert after["memory_count"] == 4
    assert after["content_chars"] > before["content_chars"][0]
    mstore.memory.rebuild_projections()
    assert stored_rows(mstore).row(0, named=True) == after
    page = mstore.memory.sessions()
    assert page.rows["live_count"].to_list() == [2]  # computed at read time, never stored


def test_last_member_is_the_arg_max_of_created_at_then_id(mstore):
    # equal timestamps: the higher capsule number wins (cap-10 after cap-9, not string order)
    rows = caps([("c", 7)] * 11)
    ids = mstore.ingest(rows)
    assert ids[-1] == "cap-11"
    mstore.ingest(caps([("c", 3)], tag="late-older"))  # later written, older created_at
    mstore.memory.run_cycle()
    assert stored_rows(mstore)["last_member_id"].to_list() == ["cap-11"]


def _independent_hash(row: dict) -> str:
    line = json.dumps(row, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(line.encode("utf-8")).hexdigest()


@settings(max_examples=200, deadline=None)
@given(conv=st.text(min_size=1, max_size=30), summary=st.none() | st.text(max_size=40),
       member=st.text(max_size=10), nanos=st.integers(0, 999_999_999))
def test_canonical_line_is_json_dumps_of_the_row(conv, summary, member, nanos):
    t = pl.Series([1_784_000_000 * 10**9 + nanos]).cast(pl.Datetime("ns", "UTC"))
    frame = pl.DataFrame({"conversation_id": [conv], "first_at": t, "last_at": t,
                          "memory_count": [3], "content_chars": [12],
                          "last_member_id": [member], "summary": pl.Series([summary], dtype=pl.String)})
    line = frame.select(canonical_line()).item()
    frac = f".{nanos:09d}".rstrip("0") if nanos else ""
    whole = dt.datetime.fromtimestamp(1_784_000_000, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    stamp = f"{whole}{frac}Z"
    expected = json.dumps({"conversation_id": conv, "first_at": stamp, "last_at": stamp,
                           "memory_count": 3, "content_chars": 12, "last_member_id": member,
                           "summary": summary}, ensure_ascii=False, separators=(",", ":"))
    assert line == expected


def test_hash_is_the_sha256_of_the_canonical_row(mstore):
    mstore.ingest(caps([('conv "quoted"\n', 1.000123), ("ünï\\cöde", 2)]))
    mstore.memory.summarize(['conv "quoted"\n'], lambda rows: "tab\there, \"quote\"")
    mstore.memory.run_cycle()
    for row in stored_rows(mstore).to_dicts():
        expected = {k: row[k] for k in SESSION_SCHEMA if k != "hash"}
        from tests.projections.helpers import rfc3339_ns
        for k in ("first_at", "last_at"):
            expected[k] = rfc3339_ns(expected[k])
        assert row["hash"] == _independent_hash(expected)


def test_hash_is_stable_across_processes(mstore):
    mstore.ingest(caps([("a", 1), ("b", 2.5), ("a", 3)]))
    mstore.memory.run_cycle()
    here = stored_rows(mstore).select("conversation_id", "hash").rows()
    code = textwrap.dedent(f"""
        import sys, memframe as mf
        from tests.projections.helpers import stored_rows
        store = mf.Store.open({str(mstore.path)!r})
        store.memory.rebuild_projections()
        print(stored_rows(store).select("conversation_id", "hash").rows())
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env={"PYTHONHASHSEED": "12345", "PATH": ""},
                         cwd=str(__import__("pathlib").Path(__file__).parents[2]))
    assert out.stdout.strip() == repr(here)


def test_fold_is_order_independent():
    frame = pl.DataFrame({
        "id": [f"cap-{i}" for i in range(1, 9)],
        "created_at": [at(s) for s in (5, 1, 5, 9, 2, 9, 9, 0)],
        "content_chars": [1, 2, 3, 4, 5, 6, 7, 8],
        "conversation_id": ["a", "b", "a", "b", "a", "a", None, "b"],
    })
    empty = pl.LazyFrame(schema={"seq": pl.Int64, "conversation_id": pl.String,
                                 "summary": pl.String})
    whole = fold_sessions(frame.lazy(), empty)
    for seed in range(5):
        shuffled = frame.sample(fraction=1.0, shuffle=True, seed=seed)
        part1 = fold_sessions(shuffled.head(3).lazy(), empty)
        merged = fold_sessions(shuffled.tail(5).lazy(), empty, part1.lazy())
        assert merged.equals(whole)
    assert whole.filter(pl.col("conversation_id") == "a")["last_member_id"].item() == "cap-6"


def test_partials_are_checked_in_one_pass_and_named_by_the_model_when_bad(monkeypatch):
    """A cycle's partials pass one Polars check; the pandera model runs only to name a
    failure (it cost a tenth of a steady cycle on every cycle)."""
    import pandera.errors as pae

    from memframe.projections import session_rows
    from memframe.projections.session import PARTIAL_SCHEMA

    t = dt.datetime(2026, 7, 23, tzinfo=dt.UTC)
    good = pl.DataFrame({"conversation_id": ["a", "b"], "first_at": [t, t], "last_at": [t, t],
                         "memory_count": [1, 2], "content_chars": [3, 4],
                         "last_member_id": ["cap-1", "cap-3"], "last_member_num": [1, 3],
                         "summary": [None, None], "summary_seq": [None, None]},
                        schema=PARTIAL_SCHEMA)
    calls = []
    real = session_rows.session_row_model
    monkeypatch.setattr(session_rows, "session_row_model",
                        lambda: calls.append(1) or real())
    assert session_rows._validated(good) is good and calls == []
    for bad in (good.with_columns(memory_count=pl.Series([1, -1])),
                good.with_columns(conversation_id=pl.Series(["a", "a"])),
                good.with_columns(conversation_id=pl.Series(["a", None], dtype=pl.String))):
        with pytest.raises((pae.SchemaError, pae.SchemaErrors)):
            session_rows._validated(bad)
    assert len(calls) == 3
