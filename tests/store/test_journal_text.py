"""Free text in journal rows (forget reasons) chains the same way for writer and verifier."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memframe as mf
from tests.conftest import TickingClock, verify_chain


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reason=st.text(max_size=40))
def test_any_forget_reason_keeps_the_chain_verifiable(tmp_path_factory, reason):
    store = mf.Store.create(tmp_path_factory.mktemp("j") / "s", clock=TickingClock())
    store.ingest({"content": "x", "source": "s", "anchor": "a"})
    store.forget("cap-1", reason=reason)
    journal = store.table("journal").collect()
    assert verify_chain(journal) == (True, 2)
    assert mf.digest(store).to_dict()["journal"] == {"chain": "ok", "verified": 2, "out_of_band": 0}
