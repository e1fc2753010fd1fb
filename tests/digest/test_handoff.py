"""Handoff discovery: bracket and ACTIVE() thread markers (ref 2.3, 4.3, 8 rows 6-10)."""

from __future__ import annotations

import pytest
from conftest import PROJECT, dig, ids, put, raw

from memframe.errors import MemframeError

FINISH = "memory_session_finish"


def finish_with(store, text, project=PROJECT):
    sid = store.session_start(project)
    return store.session_finish(sid, handoff=text)


def test_6_session_finish_handoff_leads_a_fresh_digest(store):
    hid = finish_with(store, "next: wire the CLI")
    text = raw(store)
    assert text.index('"handoff"') < text.index('"newest"')
    d = dig(store)
    assert ids(d["handoff"]) == [hid] == ["cap-1"]
    row = d["handoff"][0]
    assert row["headline"] == "next: wire the CLI" and row["project_id"] == PROJECT
    assert isinstance(row["created_at"], str)
    assert d["handoff_total"] == 1
    assert d["journal"]["chain"] == "ok" and d["journal"]["out_of_band"] == 0


def test_7_finish_without_handoff_leaves_digest_unchanged(store):
    sid = store.session_start(PROJECT)
    store.session_finish(sid)
    d = dig(store)
    assert "handoff" not in d and "handoff_total" not in d and d["total"] == 0


def test_8_blank_handoff_is_refused_and_leaves_the_session_open(store):
    sid = store.session_start(PROJECT)
    with pytest.raises(MemframeError):
        store.session_finish(sid, handoff="   \n ")
    d = dig(store)
    assert d["open_sessions"] == 1 and d["total"] == 0
    store.session_finish(sid)
    d = dig(store)
    assert d["open_sessions"] == 0 and d["total"] == 0


def test_9_bracket_handoffs_newest_per_project_fenced_capped_deduped(store):
    one = finish_with(store, "alpha handoff one")
    two = finish_with(store, "alpha handoff two")
    three = put(store, "other project handoff", project="other/x", source=FINISH)
    assert (one, two, three) == ("cap-1", "cap-2", "cap-3")
    d = dig(store)
    assert ids(d["handoff"]) == [three, two] and d["handoff_total"] == 2
    assert d["handoff"][0]["project_id"] == "other/x"
    assert ids(dig(store, project_prefix="other")["handoff"]) == [three]
    capped = dig(store, headlines=1)
    assert ids(capped["handoff"]) == [three] and capped["handoff_total"] == 2
    assert finish_with(store, "alpha handoff two") == two  # identical text: same capsule
    assert ids(dig(store)["handoff"]) == [three, two]


def test_10_active_thread_rows_one_per_thread(store):
    c1 = put(store, "ACTIVE(scrub): first pass")
    c2 = put(store, "ACTIVE(scrub): second pass")
    store.relate(c2, c1, "supersedes")
    c3 = put(store, "ACTIVE(press): release notes")
    put(store, "plain fact")
    put(store, "ACTIVE(unclosed thread with no paren")
    c6 = finish_with(store, "bracket handoff")
    assert ids(dig(store)["handoff"]) == [c6, c3, c2]
    c7 = put(store, "scrub thread closed")
    store.relate(c7, c2, "supersedes")
    d = dig(store)
    assert ids(d["handoff"]) == [c6, c3] and d["handoff_total"] == 2


def test_older_live_unchained_thread_row_resurfaces(store):
    old = put(store, "ACTIVE(x): old")
    new = put(store, "ACTIVE(x): new")
    assert ids(dig(store)["handoff"]) == [new]
    closer = put(store, "closer")
    store.relate(closer, new, "supersedes")
    assert ids(dig(store)["handoff"]) == [old]


def test_superseded_bracket_row_stays_visible_and_claims_its_slot(store):
    older = finish_with(store, "older bracket")
    newer = finish_with(store, "newer bracket")
    replacement = put(store, "replacement note")
    store.relate(replacement, newer, "supersedes")
    d = dig(store)
    assert ids(d["handoff"]) == [newer] and older not in ids(d["handoff"])
    assert d["handoff"][0]["superseded"] is True


def test_bracket_with_active_label_dedups_against_its_thread(store):
    thread = put(store, "ACTIVE(t): thread row")
    plain = finish_with(store, "plain bracket")
    labelled = finish_with(store, "ACTIVE(t): bracket in thread t")
    d = dig(store)
    assert ids(d["handoff"]) == [labelled, plain]
    assert thread not in ids(d["handoff"])


def test_empty_label_is_its_own_thread(store):
    bracket = finish_with(store, "bracket")
    empty = put(store, "ACTIVE(): unnamed thread")
    multi = put(store, "ACTIVE(a\nb) label spans lines")
    d = dig(store)
    assert ids(d["handoff"]) == [multi, empty, bracket]
    assert d["handoff"][0]["headline"] == "ACTIVE(a…"


def test_threads_are_per_project(store):
    a = put(store, "ACTIVE(t): in a", project="a")
    b = put(store, "ACTIVE(t): in b", project="b")
    assert ids(dig(store)["handoff"]) == [b, a]


def test_active_marker_is_case_sensitive_and_anchored(store):
    put(store, "active(t): lower case")
    put(store, " ACTIVE(t): leading space")
    assert "handoff" not in dig(store)
