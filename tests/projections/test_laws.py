"""Rule 2, one fold two callers: after any history of ingests, forgets, summaries and cycles,
the incremental projection equals the rebuild, to the hash, and both equal a plain-Python
model of the canonical rows."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memframe as mf
from memframe.derived import runs
from memframe.jobs import stages
from memframe.projections import session
from tests.conftest import TickingClock
from tests.projections.helpers import caps, model_rows, stored_rows
from tests.strategies import play_sessions, session_step


@pytest.mark.parametrize("tiny_runs", [False, True], ids=["default-runs", "tiny-runs"])
def test_rebuild_equals_incremental(tiny_runs):
    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
    @given(steps=st.lists(session_step, min_size=1, max_size=14))
    def law(steps):
        with tempfile.TemporaryDirectory() as tmp:
            store = mf.Store.create(Path(tmp) / "s", clock=TickingClock())
            play_sessions(store, steps)
            store.memory.run_cycle()
            incremental = stored_rows(store)
            assert incremental.to_dicts() == model_rows(store)
            store.memory.rebuild_projections()
            rebuilt = stored_rows(store)
            assert rebuilt.equals(incremental)
            assert rebuilt["hash"].to_list() == incremental["hash"].to_list()
            # and the doors answer the same page from either layout
            assert store.memory.run_cycle().generation is None

    with pytest.MonkeyPatch.context() as mp:
        if tiny_runs:  # force merges of the partials' runs, a chunk at a time
            mp.setattr(runs, "TIER_RUNS", 2)
            mp.setattr(runs, "BASE_RUN", 2)
        law()


def test_both_callers_run_the_same_fold(mstore, monkeypatch):
    calls = []
    real = session.combine_partials

    def spy(caller):
        def call(*args, **kwargs):
            calls.append(caller)
            return real(*args, **kwargs)
        return call

    # the cycle combines the new rows' partials; the rebuild folds every row (through
    # fold_sessions); both with the one group-by
    from memframe.jobs.registry import FOLDS

    assert FOLDS["session"] is session.combine_partials
    monkeypatch.setattr(stages, "combine_partials", spy("cycle"))
    monkeypatch.setattr(session, "combine_partials", spy("rebuild"))
    mstore.ingest(caps([("a", 1)]))
    mstore.memory.run_cycle()
    assert calls == ["cycle"]
    mstore.memory.rebuild_projections()
    assert calls == ["cycle", "rebuild"]
