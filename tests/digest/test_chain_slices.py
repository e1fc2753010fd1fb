"""The journal verifier walks in slices; a break is found wherever it falls."""

from __future__ import annotations

import pytest

import memframe as mf
from memframe.digest import ledger


@pytest.mark.parametrize("broken_at", [1, 3, 4, 7, 12])
def test_a_break_is_reported_at_its_seq_across_slice_edges(tmp_path, clock, monkeypatch, broken_at):
    monkeypatch.setattr(ledger, "VERIFY_SLICE_ROWS", 3)
    store = mf.Store.create(tmp_path / "s", clock=clock)
    for i in range(12):
        store.ingest({"content": f"c{i}", "source": "s", "anchor": "a"})
    journal = store.table("journal").collect()
    assert ledger.verify_chain(journal) == {"chain": "ok", "verified": 12}
    tampered = journal.with_columns(
        journal["chained_hash"].scatter(broken_at - 1, "0" * 64))
    assert ledger.verify_chain(tampered) == {"chain": "broken", "broken_seq": broken_at}
