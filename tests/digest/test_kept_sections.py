"""The subset sections the digest job keeps (`memframe.digest.state.sections`): an
unfenced digest with a cap up to `CAP` reads them instead of the subset and the graph while
they are current, answers the very bytes of the computation over the subset, and falls
back to it as soon as a row it cannot see past (a subset capsule touched, the graph
written, a stale mark) says the kept values may be wrong."""

from __future__ import annotations

import datetime as dt
import json
import tempfile
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memframe as mf
from memframe.digest.capsules import resolve_expired
from memframe.digest.state import digest_subset, sections, warm_reader
from memframe.digest.state.sections import cap_kept
from tests.conftest import TickingClock
from tests.strategies import LAW_EXAMPLES, NOW, digest_step, play

CAPS = (0, 1, 3, 10, sections.CAP, sections.CAP + 1)


@pytest.fixture
def spy(monkeypatch):
    """Which reads a digest made: ``kept`` (kept values answered), ``subset`` (the
    stored subset was read), ``graph`` (the graph's kept values were read)."""
    seen: list[str] = []
    read_current = sections.read_current

    def kept(view, n):
        values, read = read_current(view, n)
        if values is not None:
            seen.append("kept")
        return values, read

    monkeypatch.setattr(sections, "read_current", kept)
    read_subset = digest_subset.read_subset

    def subset(view, *args, **kwargs):
        seen.append("subset")
        return read_subset(view, *args, **kwargs)

    monkeypatch.setattr(digest_subset, "read_subset", subset)
    from memframe.digest.state import kept_families

    read_values = kept_families.read_values

    def graph(view, family):
        if family == "graph":
            seen.append(family)
        return read_values(view, family)

    monkeypatch.setattr(kept_families, "read_values", graph)
    return seen


def _store(path) -> tuple[mf.Store, list[str]]:
    store = mf.Store.create(path, clock=TickingClock())
    rows = [{"content": f"ACTIVE(t{i % 4}): step {i}" if i % 3 else f"note {i}",
             "source": "memory_session_finish" if i % 7 == 0 else "note", "anchor": "a",
             "project_id": ["p", "p/sub", "q"][i % 3],
             "kind": ["epic", "task", None, None][i % 4],
             "created_at": NOW - dt.timedelta(days=40 - i),
             "valid_to": NOW + dt.timedelta(days=i - 20) if i % 5 == 0 else None}
            for i in range(40)]
    ids = store.ingest(rows)
    for a, b, kind in [(1, 2, "blocks"), (2, 3, "blocks"), (5, 0, "grounded_in"),
                       (9, 0, "part_of"), (13, 4, "part_of"), (6, 7, "witnesses"),
                       (11, 8, "supersedes")]:
        store.relate(ids[a], ids[b], kind)
    store.pin(ids[12], True)
    store.session_start("p")
    store.memory.run_cycle()
    return store, ids


def _same(view, n=10, now=NOW, prefix=None) -> str:
    warm = mf.digest(view, headlines=n, now=now, project_prefix=prefix).to_json()
    assert warm == mf.digest(view, headlines=n, now=now, project_prefix=prefix,
                             verify="full").to_json()
    return warm


def test_a_digest_after_new_plain_capsules_reads_the_kept_sections(tmp_path, spy):
    store, _ids = _store(tmp_path / "s")
    store.ingest([{"content": f"plain {i}", "source": "note", "anchor": "a"} for i in range(5)])
    for n in CAPS:
        for now in (NOW, NOW - dt.timedelta(days=30), NOW + dt.timedelta(days=30)):
            spy.clear()
            _same(store, n, now)
            if n <= sections.CAP:  # neither the subset nor the graph is read
                assert spy == ["kept"], n
            else:
                assert "kept" not in spy and "subset" in spy and "graph" in spy
    spy.clear()
    _same(store, 3, prefix="p")  # a fence reads the subset
    assert "kept" not in spy and "subset" in spy
    body = mf.digest(store, headlines=sections.CAP, now=NOW).to_dict()
    # the store's lists are long enough to show the cap at work
    assert body["handoff_total"] > 3 and len(body["open_efforts"]) > 3
    assert any(row.get("expired") for row in body["open_efforts"])


@pytest.mark.parametrize("change", ["handoff", "thread", "forget", "pin", "relate", "kind",
                                    "review", "recall"])
def test_a_row_the_kept_values_cannot_see_past_reads_the_subset(tmp_path, spy, change):
    store, ids = _store(tmp_path / "s")
    if change == "handoff":
        store.ingest({"content": "done", "source": "memory_session_finish", "anchor": "a"})
    elif change == "thread":
        store.ingest({"content": "ACTIVE(t9): new thread", "source": "note", "anchor": "a"})
    elif change == "forget":
        store.forget(ids[1], "purge")  # a thread row, erased
    elif change == "pin":
        store.pin(ids[3], True)
    elif change == "relate":
        store.relate(ids[4], ids[8], "grounded_in")
    elif change == "kind":
        store.classify(ids[2], kind="epic")
    elif change == "review":
        store.review(ids[1], "proposed")  # a task (a staged epic: see the test below)
    elif change == "recall":  # a recall touches a subset capsule's state row
        store.record_recall([ids[1]])
    spy.clear()
    _same(store)
    assert "kept" not in spy and "subset" in spy
    store.memory.run_cycle()  # the job keeps them again
    spy.clear()
    _same(store)
    assert spy == ["kept"]


def test_a_staged_epic_with_members_is_never_answered_from_kept_values(tmp_path, spy):
    """0.3.0 admits a staged epic through a member the population holds; a member's own
    forget or review changes no subset row, so such values are not reused."""
    store, ids = _store(tmp_path / "s")
    store.review(ids[4], "proposed")  # an epic with a live member (ids[13])
    store.memory.run_cycle()
    spy.clear()
    assert ids[4] in [row["id"] for row in json.loads(_same(store))["open_efforts"]]
    assert "subset" in spy  # the kept values were declined
    store.forget(ids[13])  # its only member: off the board, with no subset row changed
    assert ids[4] not in [row["id"] for row in json.loads(_same(store)).get("open_efforts", [])]


def test_a_cycle_that_changes_neither_subset_nor_graph_reads_nothing_for_them(tmp_path):
    store, ids = _store(tmp_path / "s")
    marks = store.pinned().watermarks[sections.MARK]
    store.ingest([{"content": f"plain {i}", "source": "note", "anchor": "a"} for i in range(3)])
    store.forget(ids[15])  # neither in the subset nor an endpoint of the graph
    report = store.memory.run_cycle()
    assert report.projections["digest_sections"] == {"rows_visited": 0, "rows_folded": 0,
                                                     "rows_written": 0}
    assert store.pinned().watermarks[sections.MARK] == marks
    store.ingest({"content": "ACTIVE(t1): moved on", "source": "note", "anchor": "a"})
    report = store.memory.run_cycle()
    assert report.projections["digest_sections"]["rows_written"] > 1
    assert store.pinned().watermarks[sections.MARK] != marks


def test_stale_marks_and_missing_rows_are_refused(tmp_path, spy):
    store, _ids = _store(tmp_path / "s")
    store.ingest([{"content": f"ACTIVE(x{i}): thread {i}", "source": "note", "anchor": "a"}
                  for i in range(40)])
    store.memory.run_cycle()
    view = store.pinned()
    values, read = sections.read_current(view, 1)
    # a cap of 1 reads each list's first item and every pinned row: a prefix of the table,
    # so at most a row group's worth more
    assert values is not None and len(values["handoff"]) == 1
    stored = view.derived(sections.TABLE, sections.SCHEMA).collect()
    taken = stored.filter(pl.col("k") <= sections._last(1))
    assert taken.height <= read < taken.height + sections.GROUP_ROWS
    assert read < stored.height

    class Moved:  # the subset changed since the values were kept
        def __getattr__(self, name):
            return getattr(view, name)

        @property
        def watermarks(self):
            return {**view.watermarks, digest_subset.SUBSET_MARK: -1}

    assert sections.read_current(Moved(), 10)[0] is None
    assert sections.read_current(view, sections.CAP + 1) == (None, 0)
    rows = view.derived(sections.TABLE, sections.SCHEMA).collect()
    assert sections.decode(rows.filter(pl.col("k") > 0).vstack(rows.filter(pl.col("k") == 0))) \
        == sections.decode(rows)
    assert view.watermarks[sections.MARK] == sections.marks_of(view.watermarks)


def test_resolve_expired_renders_as_the_flag_would():
    t = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    rows = pl.DataFrame({
        "id": ["cap-1", "cap-2", "cap-3"], "project_id": ["p"] * 3,
        "instruction_taint": [False] * 3, "created_at": [t] * 3, "headline": ["h"] * 3,
        "tier": [None, "archived", None], "kind": ["task", None, None],
        "valid_to": [t, t + dt.timedelta(microseconds=1), None], "superseded": [False] * 3,
    }, schema_overrides={"valid_to": pl.Datetime("ns", "UTC")})
    from memframe.digest.capsules import headline_rows

    for now in (t - dt.timedelta(days=1), t, t + dt.timedelta(microseconds=1),
                t + dt.timedelta(days=1)):
        deferred = headline_rows(rows, None)
        before = repr(deferred)
        settled = resolve_expired(deferred, now)
        assert repr(deferred) == before  # the input is untouched
        deferred = settled
        assert deferred == headline_rows(rows, now)
        assert [list(r) for r in deferred] == [list(r) for r in headline_rows(rows, now)]


def test_kept_values_capped_equal_the_values_computed_for_the_cap(tmp_path):
    store, _ids = _store(tmp_path / "s")
    from memframe.digest.assemble import kept_values
    from memframe.digest.reads import job_source

    kept = kept_values(job_source(store.pinned(), sections.CAP), sections.CAP)
    for n in (0, 1, 2, 5, sections.CAP):
        direct = kept_values(job_source(store.pinned(), n), n)
        direct = resolve_expired(direct, NOW)
        assert cap_kept(kept, n, NOW) == direct, n
    before = repr(kept)
    assert cap_kept(kept, 1, NOW) != cap_kept(kept, sections.CAP, NOW)
    assert repr(kept) == before  # capping copies: the kept values are untouched


def test_the_law_holds_with_the_job_run_at_random_points(tmp_path, monkeypatch):
    used: list[bool] = []
    read_current = sections.read_current

    def kept(view, n):
        values, read = read_current(view, n)
        used.append(values is not None)
        return values, read

    monkeypatch.setattr(sections, "read_current", kept)
    changed: list[bool] = []
    subset_changed = warm_reader.WarmState.subset_changed

    def seen(self):
        changed.append(subset_changed(self))
        return changed[-1]

    monkeypatch.setattr(warm_reader.WarmState, "subset_changed", seen)

    @settings(max_examples=LAW_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    @given(before=st.lists(digest_step, min_size=1, max_size=14),
           after=st.lists(digest_step.filter(lambda s: s[0] not in ("cycle", "rebuild")), max_size=4))
    def law(before, after):
        with tempfile.TemporaryDirectory() as tmp:
            store = mf.Store.create(Path(tmp) / "s", clock=TickingClock())
            play(store, before)
            store.memory.run_cycle()
            play(store, after)  # rows the kept values may or may not see past
            for n in (0, 2, 10):
                for now in (NOW, NOW + dt.timedelta(days=5)):
                    _same(store.pinned(), n, now)

    law()
    # kept values answered (the fallback after a touched subset has its own test above)
    assert any(used) and not all(changed)
