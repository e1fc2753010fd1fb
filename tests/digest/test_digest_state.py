"""The digest state's laws (spec 000 applied to the digest): one fold for the cycle and the
rebuild door, rebuild == incremental to the hash (state rows, subset, aggregates), the state
read at any generation equals the fold of every row at that generation, and a virgin store
answers zero."""

from __future__ import annotations

import tempfile
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memframe as mf
from memframe.derived import runs
from memframe.digest.checks import check_rows
from memframe.digest.state import (
    digest_aggregates,
    digest_capsules,
    digest_subset,
    warm_reader,
)
from memframe.jobs.registry import DOORS, FOLDS
from memframe.state import SOURCES, STORED_SCHEMA, fold_state
from tests.conftest import TickingClock
from tests.strategies import LAW_EXAMPLES, digest_step, play


def _stored(view) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """State rows, subset members and aggregates as stored at ``view``."""
    rows, _ = digest_capsules.state_runs().read_all(view)
    sub, _ = digest_subset.read_subset(view)
    agg = view.derived(digest_aggregates.AGG_TABLE, digest_aggregates.AGG_SCHEMA).collect()
    # the archive instants live in their own table, with a running total
    archive = view.derived(digest_aggregates.ARCHIVE_TABLE, digest_aggregates.ARCHIVE_SCHEMA).collect()
    assert archive.get_column("cum").equals(archive.get_column("n").cum_sum())
    assert archive.get_column("at").is_sorted()
    agg = pl.concat([agg, archive.select(pl.lit("archive").alias("metric"),
                                         pl.lit("").alias("key"), "at", "n")])
    return rows, sub, agg


def _from_scratch(view) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """The same three, folded from every canonical row at ``view``."""
    sources = {name: view.table(name) for name in SOURCES}
    rows = fold_state(sources)
    # the state's runs store no text; the subset keeps its members' text
    return (rows.select(list(STORED_SCHEMA)), rows.filter(digest_subset.subset_expr()),
            digest_aggregates.merge_aggregates(digest_aggregates.contributions(rows)))


def _same(a: pl.DataFrame, b: pl.DataFrame, key: list[str]) -> bool:
    return a.sort(key, nulls_last=True).equals(b.sort(key, nulls_last=True))


def test_the_registry_names_the_digest_fold_and_door():
    assert FOLDS["digest"] is fold_state and DOORS["digest"] is warm_reader.state_door


@pytest.mark.parametrize("tiny_runs", [False, True], ids=["default-runs", "tiny-runs"])
def test_rebuild_equals_incremental_and_state_at_any_generation_equals_the_fold(tiny_runs):
    @settings(max_examples=LAW_EXAMPLES + 5, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(steps=st.lists(digest_step, min_size=1, max_size=16))
    def law(steps):
        with tempfile.TemporaryDirectory() as tmp:
            store = mf.Store.create(Path(tmp) / "s", clock=TickingClock())
            play(store, steps)
            # merge-on-read: the state at this generation (job run at random points or
            # never) is the fold of every row
            view = store.pinned()
            state, _, _ = warm_reader.read_state(view)
            scratch = _from_scratch(view)
            assert digest_capsules.state_hash(state) == digest_capsules.state_hash(scratch[0])
            store.memory.run_cycle()
            incremental = _stored(store.pinned())
            store.memory.rebuild_projections()
            rebuilt = _stored(store.pinned())
            scratch = _from_scratch(store.pinned())
            if scratch[0].height == 0:
                return  # nothing to fold: nothing stored either way
            for got, want, rebuild in zip(incremental, scratch, rebuilt, strict=True):
                key = ["metric", "key", "at"] if "metric" in want.columns else ["num"]
                assert _same(got, want, key) and _same(rebuild, want, key)
            assert digest_capsules.state_hash(incremental[0]) == digest_capsules.state_hash(rebuilt[0])

    with pytest.MonkeyPatch.context() as mp:
        if tiny_runs:  # the state's versioned runs merge, a chunk of 2-row groups at a time
            mp.setattr(runs, "TIER_RUNS", 2)
            mp.setattr(runs, "BASE_RUN", 2)
            mp.setattr(digest_capsules, "ROW_GROUP_ROWS", 2)
        law()


def test_an_erased_subset_member_keeps_the_text_of_no_content(tmp_path):
    """Regression: the erasure removes an epic's row from the subset's text table; the
    cycle after it writes the row again with the fold's text for an erased capsule (an
    empty headline), as a rebuild would have it, not as unknown text."""
    def note(kind, source="note"):
        return {"content": "plain note", "project_id": "p", "source": source, "kind": kind,
                "late": 0, "expires": False, "imported": False}

    store = mf.Store.create(tmp_path / "s", clock=TickingClock())
    play(store, [("ingest", [note(None), note("epic"), note(None),
                             note(None, "memory_session_finish")]),
                 ("rebuild", None), ("erase", ([1], "redact"))])
    store.memory.run_cycle()
    stored = _stored(store.pinned())[1].sort("num")
    assert stored.select("num", "headline").rows() == [(2, ""), (4, "plain note #4")]
    assert _same(stored, _from_scratch(store.pinned())[1], ["num"])


def test_a_virgin_store_answers_zero(tmp_path):
    store = mf.Store.create(tmp_path / "s")
    page = warm_reader.state_door(store.pinned())
    assert page.rows.height == 0 and page.rows_visited == 0
    report = store.memory.run_cycle()
    assert report.generation is None and store.generation == 0
    assert report.projections["digest_capsules"] == {"rows_visited": 0, "rows_folded": 0,
                                                     "rows_written": 0}


def test_the_state_door_answers_the_current_rows_without_the_job(tmp_path):
    store = mf.Store.create(tmp_path / "s", clock=TickingClock())
    a, b = store.ingest([{"content": "ACTIVE(t): one", "source": "s", "anchor": "a"},
                         {"content": "two\nlines", "source": "memory_session_finish",
                          "anchor": "a", "project_id": "p"}])
    store.memory.run_cycle()
    store.relate(b, a, "supersedes")
    store.record_recall([a, a])
    store.pin(b)
    rows = warm_reader.state_door(store.pinned()).rows.sort("num")
    assert rows.select("num", "thread", "headline", "bracket", "superseded", "recall_count",
                       "pinned").rows() == [
        (1, "t", "ACTIVE(t): one", False, True, 2, None),
        (2, None, "two…", True, False, 0, True),
    ]


def test_rows_the_digest_fails_closed_on_are_never_folded(tmp_path):
    store = mf.Store.create(tmp_path / "s", clock=TickingClock())
    store.ingest({"content": "fine", "source": "s", "anchor": "a"})
    store.memory.run_cycle()
    before = store.pinned().watermarks[digest_capsules.WATERMARK]
    # a journal row without a time: the digest fails closed on it, the job leaves it be
    bad = pl.DataFrame({"seq": [99], "audit_seq": [99], "at": [None], "action": ["x"],
                        "subject": ["cap-1"]}, schema_overrides={"at": pl.Datetime("ns", "UTC")})
    assert check_rows("journal", bad) == "journal row at seq 99 has no valid time"
    assert check_rows("capsules", pl.DataFrame(
        {"seq": [5], "id": ["cap-5"], "project_id": [None], "created_at": [None],
         "instruction_taint": [False]})) == "corrupt capsule row at seq 5"
    assert store.pinned().watermarks[digest_capsules.WATERMARK] == before


def test_a_warm_digest_reads_what_changed_not_every_capsule(tmp_path):
    store = mf.Store.create(tmp_path / "s", clock=TickingClock())
    store.ingest([{"content": f"note {i}", "source": "s", "anchor": "a",
                   "project_id": f"p{i % 3}"} for i in range(3_000)])
    store.memory.run_cycle()
    store.ingest([{"content": f"new {i}", "source": "s", "anchor": "a", "project_id": "p1"}
                  for i in range(10)])
    view = store.pinned()
    warm, cold = mf.digest(view), mf.digest(view, verify="full")
    assert warm.to_json() == cold.to_json()
    # the 10 new capsule rows and their 10 journal rows (read once: the chain check hands
    # its rows to the state), the aggregates and the kept sections (one row: no subset, no
    # graph); not the checkpoint's rows (its seal confirms the verified parts), nor any
    # stored state row (the newest are the new ones, and the aggregates say no capsule was
    # ever recalled)
    small = sum(view.row_count(t) for t in ("projections/digest_aggregates",
                                            "projections/text/digest_sections"))
    assert view.row_count("projections/text/digest_sections") == 1
    assert warm.rows_visited == 10 + 10 + small
    assert cold.rows_visited > 3 * 3_000
    fenced = mf.digest(view, project_prefix="p1", headlines=3)
    assert fenced.to_json() == mf.digest(view, project_prefix="p1", headlines=3,
                                         verify="full").to_json()


def test_a_state_of_another_layout_is_rebuilt_not_read(tmp_path, monkeypatch):
    store = mf.Store.create(tmp_path / "s", clock=TickingClock())
    ids = store.ingest([{"content": f"ACTIVE(t): {i}", "source": "s", "anchor": "a",
                         "kind": "epic" if i == 0 else None} for i in range(5)])
    store.relate(ids[3], ids[0], "part_of")
    store.memory.run_cycle()
    # as a later layout would see this state: its watermark is not the layout's own
    monkeypatch.setattr(digest_capsules, "WATERMARK", digest_capsules.WATERMARK + "-next")
    assert digest_capsules.watermark_of(store.pinned()) is None
    assert mf.digest(store).to_json() == mf.digest(store, verify="full").to_json()
    report = store.memory.run_cycle().projections["digest_capsules"]
    assert report["rows_written"] == 5  # rebuilt from every row
    assert digest_capsules.watermark_of(store.pinned()) is not None
    assert mf.digest(store).to_json() == mf.digest(store, verify="full").to_json()


def test_a_cycle_reads_what_was_written_not_the_state(tmp_path):
    """New capsules' numbers lie above every stored run: a cycle appends their rows and
    reads no stored state row; merges read at most their budget (and a whole row group
    to make progress), however large the state."""
    visited: dict[int, list[int]] = {}
    for n in (300, 3_000):
        store = mf.Store.create(tmp_path / f"s{n}", clock=TickingClock())
        store.ingest([{"content": f"note {i}", "source": "s", "anchor": "a"} for i in range(n)])
        store.memory.rebuild_projections()
        for k in range(12):
            store.ingest([{"content": f"new {k} {i}", "source": "s", "anchor": "a"}
                          for i in range(5)])
            report = store.memory.run_cycle().projections["digest_capsules"]
            visited.setdefault(n, []).append(report["rows_visited"])
        assert digest_capsules.state_runs().read_all(store.pinned())[0].height == n + 60
    # before the first merge (8 runs in tier 0) both stores read the same rows: the
    # leaders and the aggregates, nothing that grows with the state
    assert visited[300][:7] == visited[3_000][:7]
    bound = visited[3_000][0] + runs.merge_budget(5).total + digest_capsules.ROW_GROUP_ROWS
    assert max(visited[3_000]) <= bound
