"""The cold digest folds the digest state range by range of capsule numbers
(`memframe.digest.state.cold_fold.fold_warm`): with ranges of a few capsules, the
ranges' state rows, subset and aggregates are the one fold's of every row, and the
digest's bytes are the full algorithm's (which are ``verify="full"``'s), for several list caps,
fences and instants."""

from __future__ import annotations

import datetime as dt
import tempfile
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memframe as mf
from memframe.digest import digest_tables
from memframe.digest.state import (
    cold_fold,
    digest_aggregates,
    digest_capsules,
    digest_leaders,
    digest_subset,
)
from memframe.digest.state.kept_source import top_requests
from memframe.state import SOURCES, fold_state
from memframe.store import ranges as store_ranges
from tests.conftest import TickingClock
from tests.strategies import LAW_EXAMPLES, NOW, capsule, digest_step, play

#: histories that never run the digest job: every digest of them is cold
cold_step = digest_step.filter(lambda s: s[0] not in ("cycle", "rebuild"))
history = st.tuples(st.just("ingest"), st.lists(capsule, min_size=3, max_size=8)).flatmap(
    lambda first: st.lists(cold_step, max_size=14).map(lambda rest: [first, *rest]))


def _ranges(view) -> int:
    """How many ranges the cold fold of ``view`` folds at the current ``FOLD_RANGE``."""
    bounds, _spans = store_ranges._capsule_spans(view, cold_fold.range_size(view))
    return len(bounds) + 1


def _whole(view) -> pl.DataFrame:
    """The one fold of every source row at ``view`` (no ranges)."""
    return fold_state({name: view.table(name) for name in SOURCES})


class _Counted:
    """`fold_state`, counting its calls."""

    def __init__(self) -> None:
        self.calls = 0
        self.fold = cold_fold.fold_state

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.fold(*args, **kwargs)


#: examples of the bytes law: fewer than its sibling's below, which checks what the ranges
#: hand the digest (every state row, the subset, the aggregates and the top-N candidates,
#: range sizes 1-3) against the one fold for LAW_EXAMPLES histories; this law adds
#: the assembly over them, and folds every range again for each of its 14 cases
BYTES_EXAMPLES = LAW_EXAMPLES * 3 // 5


def test_cold_digest_bytes_equal_the_full_algorithm_whatever_the_range_size(monkeypatch):
    @settings(max_examples=BYTES_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    @given(steps=history, size=st.integers(1, 4))
    def law(steps, size):
        monkeypatch.setattr(store_ranges, "FOLD_RANGE", size)
        monkeypatch.setattr(cold_fold, "DIGEST_RANGE", size)  # the digest's own
        with tempfile.TemporaryDirectory() as tmp:
            store = mf.Store.create(Path(tmp) / "s", clock=TickingClock())
            play(store, steps)
            view = store.pinned()
            assert digest_capsules.watermark_of(view) is None  # no state: the digest folds it cold
            ranges = _ranges(view)
            capsules = store.row_count("capsules")
            assert ranges == -(-capsules // size)  # ceil: every range holds `size` numbers
            tables = {name: frame.collect() for name, frame in view.tables().items()}
            cases = [(n, prefix, NOW) for n in (0, 1, 2, 5) for prefix in (None, "nott",
                                                                            "other")]
            cases += [(3, None, NOW - dt.timedelta(days=200)),
                      (2, "nott", NOW + dt.timedelta(days=90))]
            for n, prefix, now in cases:
                kwargs = {"headlines": n, "project_prefix": prefix, "now": now}
                counted = _Counted()
                monkeypatch.setattr(cold_fold, "fold_state", counted)
                cold = mf.digest(view, **kwargs).to_json()
                monkeypatch.setattr(cold_fold, "fold_state", counted.fold)
                assert counted.calls == ranges, (counted.calls, ranges)  # range by range
                # (verify="full" equals the reference: test_warm_equals_full)
                reference = digest_tables(tables, **kwargs).to_json()
                assert cold == reference, (n, prefix, size)

    law()


def test_the_ranges_fold_what_the_one_fold_of_every_row_folds(monkeypatch):
    @settings(max_examples=LAW_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    @given(steps=st.lists(digest_step, min_size=1, max_size=16), size=st.integers(1, 3))
    def law(steps, size):
        monkeypatch.setattr(store_ranges, "FOLD_RANGE", size)
        monkeypatch.setattr(cold_fold, "DIGEST_RANGE", size)  # the digest's own
        with tempfile.TemporaryDirectory() as tmp:
            store = mf.Store.create(Path(tmp) / "s", clock=TickingClock())
            play(store, steps)
            view = store.pinned()
            rows = _whole(view)
            warm, _sources = cold_fold.fold_warm(view)  # every row kept
            assert digest_capsules.state_hash(warm.merged) == digest_capsules.state_hash(rows)
            assert warm.merged.equals(rows)  # in number order, as the one fold gives them
            assert warm.subset.equals(rows.filter(digest_subset.subset_expr()))
            assert warm.aggregates.equals(digest_aggregates.aggregates_of(rows))
            # the top-N candidates of each range answer the top N of the whole
            for n in (1, 2, 4):
                tops = top_requests(n, None) + top_requests(n, "nott")
                warm, _sources = cold_fold.fold_warm(view, tops)
                assert warm.aggregates.equals(digest_aggregates.aggregates_of(rows))
                for m, order, keep in tops:
                    got = warm.top_rows(keep, m, order)
                    assert got.equals(digest_leaders.first_rows(rows, m, order, keep)), (m, order)

    law()


def test_ranges_are_every_range_size_th_capsule_number(store, monkeypatch):
    store.ingest([{"content": f"note {i}", "source": "s", "anchor": "a"} for i in range(7)])
    store.ingest([{"content": f"more {i}", "source": "s", "anchor": "a"} for i in range(3)])
    monkeypatch.setattr(store_ranges, "FOLD_RANGE", 4)
    bounds, spans = store_ranges._capsule_spans(store.pinned(), store_ranges.FOLD_RANGE)
    assert bounds == [5, 9]  # ranges: ..4, 5..8, 9..
    assert [(first, last) for _part, first, last in spans] == [(1, 7), (8, 10)]


def test_a_cold_state_refuses_a_top_n_it_kept_no_candidates_for(store, monkeypatch):
    store.ingest([{"content": f"note {i}", "source": "s", "anchor": "a"} for i in range(5)])
    monkeypatch.setattr(store_ranges, "FOLD_RANGE", 2)
    monkeypatch.setattr(cold_fold, "DIGEST_RANGE", 2)  # the digest's own
    warm, _sources = cold_fold.fold_warm(store.pinned(), top_requests(2, None))
    _n, order, keep = top_requests(2, None)[0]
    assert warm.top_rows(keep, 2, order).get_column("num").to_list() == [5, 4]
    with pytest.raises(ValueError, match="candidates"):
        warm.top_rows(keep, 3, order)  # more than were kept per range
    _n, order, fenced = top_requests(2, "elsewhere")[0]
    with pytest.raises(ValueError, match="candidates"):
        warm.top_rows(fenced, 1, order)  # a filter it kept none for
