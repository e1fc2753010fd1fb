"""`mf.digest_diff`: the list entries are the differences of the two lists, the values every
other scalar that changed; bad input is refused, stored text is escaped."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memframe as mf
from memframe.digest.result import Digest
from tests.conftest import TickingClock

ids = st.lists(st.integers(1, 30).map(lambda i: f"cap-{i}"), unique=True, max_size=12)


def _ranks(items: list[str]) -> dict[str, int]:
    return {cid: i + 1 for i, cid in enumerate(items)}


@settings(max_examples=200, deadline=None)
@given(before=ids, after=ids, rows=st.booleans())
def test_list_entries_are_the_differences_of_the_two_lists(before, after, rows):
    def wrap(items):
        return [{"id": cid, "headline": "h"} for cid in items] if rows else items

    diff = mf.digest_diff(Digest({"newest": wrap(before)}), Digest({"newest": wrap(after)}))
    got = diff.lists
    assert set(got["section"]) <= {"newest"}
    rb, ra = _ranks(before), _ranks(after)
    entered = got.filter(change="entered")
    left = got.filter(change="left")
    moved = got.filter(change="moved")
    assert set(entered["id"]) == set(after) - set(before)
    assert set(left["id"]) == set(before) - set(after)
    assert set(moved["id"]) == {c for c in set(before) & set(after) if rb[c] != ra[c]}
    for cid, _change, rank_b, rank_a in got.select("id", "change", "rank_before",
                                                   "rank_after").iter_rows():
        assert rank_b == rb.get(cid) and rank_a == ra.get(cid)
    assert diff.values.height == 0  # the rows' own fields did not change


scalars = st.one_of(st.integers(-3, 3), st.sampled_from(["ok", "broken", "a\x1b[2Jb"]),
                    st.booleans())
bodies = st.dictionaries(st.sampled_from(["total", "relations", "audit_events", "x"]),
                         scalars, max_size=4)


@settings(max_examples=200, deadline=None)
@given(before=bodies, after=bodies)
def test_values_are_every_scalar_that_changed(before, after):
    diff = mf.digest_diff(Digest(before), Digest(after))
    expected = {key: (json.dumps(before[key]) if key in before else None,
                      json.dumps(after[key]) if key in after else None)
                for key in {*before, *after}
                if key not in before or key not in after or before[key] != after[key]
                or type(before[key]) is not type(after[key])}
    assert {p: (b, a) for p, b, a in diff.values.iter_rows()} == expected
    assert diff.lists.height == 0
    assert diff.unchanged == (not expected)


def test_a_store_between_two_session_starts(tmp_path):
    store = mf.Store.create(tmp_path / "s", clock=TickingClock())
    caps = store.ingest([{"content": f"note {i}", "source": "s", "anchor": "a",
                          "project_id": "team" if i % 2 else "solo"} for i in range(5)])
    first = mf.digest(store, headlines=3)
    store.record_recall([caps[0], caps[0], caps[1]])
    store.forget(caps[4], mode="purge")
    [new] = store.ingest([{"content": "fresh <b>note</b>", "source": "s", "anchor": "a",
                           "project_id": "team"}])
    second = mf.digest(store, headlines=3)
    diff = mf.digest_diff(first, second)
    assert (diff.before, diff.after) == (first.generation, second.generation)
    newest = {r["id"]: r for r in diff.lists.filter(section="newest").to_dicts()}
    b, a = [r["id"] for r in first.newest], [r["id"] for r in second.newest]
    assert {cid for cid, r in newest.items() if r["change"] == "entered"} == set(a) - set(b)
    assert {cid for cid, r in newest.items() if r["change"] == "left"} == set(b) - set(a)
    assert newest[new]["rank_after"] == 1
    assert set(diff.lists.filter(section="most_recalled")["id"]) == {caps[0], caps[1]}
    values = {p: (x, y) for p, x, y in diff.values.iter_rows()}
    assert values.get("total") == (None if first.total == second.total
                                   else (str(first.total), str(second.total)))
    assert values["by_project[team].count"] == ("2", "3")
    assert values["by_project[solo].count"] == ("3", "2")
    assert all(len(line) <= 80 for line in diff.to_text().splitlines())
    assert json.loads(diff.to_json())["lists"] == diff.lists.to_dicts()
    assert mf.digest_diff(second, mf.digest(store, headlines=3)).unchanged


def test_a_headline_that_changed_is_a_value_of_its_row(tmp_path):
    before = Digest({"newest": [{"id": "cap-1", "headline": "old"}]})
    after = Digest({"newest": [{"id": "cap-1", "headline": "<b>new</b> \x1b]0;x\x07"}]})
    diff = mf.digest_diff(before, after)
    assert diff.lists.height == 0
    assert diff.values.rows() == [("newest[cap-1].headline", '"old"',
                                   '"<b>new</b> \\u001b]0;x\\u0007"')]
    assert "\x1b" not in diff.to_text()
    assert "&lt;b&gt;new" in diff.to_html() and "<b>new" not in diff.to_html()
    assert "&lt;b&gt;new" in diff._repr_html_()


def test_bad_input_is_refused_with_the_fix(tmp_path):
    d = Digest({"total": 1})
    with pytest.raises(mf.errors.InvalidInputError, match="two Digests"):
        mf.digest_diff(d, {"total": 1})  # type: ignore[arg-type]
    stub = Digest(d.to_dict(), known_hash=d.hash)
    with pytest.raises(mf.errors.InvalidInputError, match="without known_hash"):
        mf.digest_diff(stub, d)


def test_digests_asked_for_differently_say_so(tmp_path):
    store = mf.Store.create(tmp_path / "s", clock=TickingClock())
    store.ingest([{"content": f"note {i}", "source": "s", "anchor": "a",
                   "project_id": "team" if i % 2 else "solo"} for i in range(5)])
    wide, narrow = mf.digest(store, headlines=10), mf.digest(store, headlines=2)
    diff = mf.digest_diff(wide, narrow)
    # nothing in the store changed: the entries that left are the cap's doing, and it says so
    assert set(diff.lists["change"]) == {"left"}
    assert diff.caveats == ("headlines differs (10, then 2): lists may differ by the cap alone",)
    assert "note: headlines differs (10, then 2)" in diff.to_text()
    fenced = mf.digest_diff(wide, mf.digest(store, project_prefix="<team>"))
    assert len(fenced.caveats) == 1 and '(null, then "<team>")' in fenced.caveats[0]
    assert all(len(line) <= 80 for line in fenced.to_text().splitlines())
    assert "by the fence alone" in " ".join(fenced.to_text().split())
    assert "&lt;team&gt;" in fenced.to_html() and "<team>" not in fenced.to_html()
    assert mf.digest_diff(wide, mf.digest(store)).caveats == ()
    assert "note:" not in mf.digest_diff(wide, mf.digest(store)).to_text()
