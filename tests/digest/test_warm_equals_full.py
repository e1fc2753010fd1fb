"""The warm digest (checkpointed journal, content read for emitted rows only) answers the
same bytes as ``verify="full"`` and as the full algorithm over the canonical tables held in
memory, after any history of verbs with the digest job run at random points or never; and
a job killed at any instant leaves a store whose next digest is exact."""

from __future__ import annotations

import datetime as dt
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memframe as mf
from memframe.digest import digest_tables
from tests.conftest import TickingClock
from tests.strategies import LAW_EXAMPLES, NOW, digest_step, play


def _bytes_agree(view, reference: bool = True) -> None:
    """The warm digest's bytes are verify="full"'s and (``reference``) the full algorithm's
    over the tables held in memory."""
    tables = {name: frame.collect() for name, frame in view.tables().items()} if reference else {}
    # archive candidates and expiry are keyed by instants: answer an earlier "now" too
    cases = [(n, prefix, NOW) for n in (0, 1, 3, 10) for prefix in (None, "nott", "other")]
    cases += [(3, None, NOW - dt.timedelta(days=200)), (2, "nott", NOW + dt.timedelta(days=90))]
    for n, prefix, now in cases:
        if True:
            kwargs = {"headlines": n, "project_prefix": prefix, "now": now}
            warm = mf.digest(view, **kwargs).to_json()
            full = mf.digest(view, verify="full", **kwargs).to_json()
            assert warm == full, (n, prefix, now)
            if reference:
                assert full == digest_tables(tables, **kwargs).to_json(), (n, prefix, now)


def test_warm_bytes_equal_full_bytes_equal_the_full_algorithm():
    @settings(max_examples=LAW_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
    @given(steps=st.lists(digest_step, min_size=1, max_size=18), final_cycle=st.booleans())
    def law(steps, final_cycle):
        with tempfile.TemporaryDirectory() as tmp:
            store = mf.Store.create(Path(tmp) / "s", clock=TickingClock())
            play(store, steps)
            if final_cycle:
                store.memory.run_cycle()
            _bytes_agree(store.pinned())
            if store.generation > 1:  # time travel: a frozen older view
                _bytes_agree(store.at(store.generation // 2))
            roots = mf.per_project_digests(store, 1, now=NOW)
            for root, d in roots.items():
                assert d.to_json() == mf.digest(store, project_prefix=root, now=NOW,
                                                verify="full").to_json()

    law()


JOB = textwrap.dedent("""
    import sys, memframe as mf, memframe.schema
    from memframe.projections.session import session_row_model
    store = mf.Store.open(sys.argv[1])
    memframe.schema.model("capsules"); session_row_model()  # declared before the kill window
    print("ready", flush=True)
    i = 0
    while True:
        store.ingest([{"content": f"job {i} {k}", "source": "s", "anchor": "a",
                       "conversation_id": f"c{(i + k) % 5}"} for k in range(3)])
        if i % 3 == 2:
            store.forget(f"cap-{i + 1}")
        if i % 4 == 1:
            store.relate(f"cap-{3 * i + 1}", f"cap-{3 * i + 2}", "blocks")
            store.record_miss([f"term{i}"], "abstain")
        store.memory.run_cycle()
        i += 1
""")


@pytest.mark.slow
def test_sigkill_during_the_digest_job_leaves_an_exact_digest(tmp_path):
    path = tmp_path / "s"
    mf.Store.create(path)
    for delay in (0.3, 0.7, 1.1, 1.6):
        proc = subprocess.Popen([sys.executable, "-c", JOB, str(path)],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        store = mf.Store.open(path)
        view = store.pinned()
        _bytes_agree(view)  # whatever the job had landed, the digest is exact
        store.memory.run_cycle()  # and the job resumes from what landed
        _bytes_agree(store.pinned())
    assert store.row_count("capsules") > 0
