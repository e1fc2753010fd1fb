"""The staged fence (ref 2.1), ``staged`` and ``pinned``/``pinned_total`` (4.17, 8 rows 44-45),
and the review/pin verbs that feed them."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest
from conftest import PROJECT, T0, dig, ids, put

import memframe as mf
from memframe import schema as S
from memframe.digest import digest_tables
from memframe.digest.batch import per_project_digests
from memframe.errors import (
    InvalidInputError,
    MemframeError,
    ReadOnlyStoreError,
    UnknownCapsuleError,
)

DAY = dt.timedelta(days=1)


def journal(store) -> list[tuple]:
    return (store.table("journal").sort("audit_seq")
            .select("action", "subject", "reason").collect().rows())


# -- the verbs -----------------------------------------------------------------------------

def test_review_and_pin_write_one_row_and_journal_like_the_engine(store):
    a = put(store, "a draft")
    store.review(a, "proposed")
    store.review(a, "ratified", reason="checked")
    store.review(a, "rejected")
    store.pin(a, reason="load-bearing")
    store.pin(a, pinned=False)
    reviews = store.table("reviews").sort("seq").collect()
    assert reviews.select("capsule_id", "verdict", "reason", "actor").rows() == [
        (a, "proposed", None, "memframe"), (a, "ratified", "checked", "memframe"),
        (a, "rejected", None, "memframe")]
    pins = store.table("pins").sort("seq").collect()
    assert pins.select("capsule_id", "pinned", "reason").rows() == [
        (a, True, "load-bearing"), (a, False, None)]
    assert journal(store)[1:] == [
        ("memory_ingest", a, "staged proposed"),
        ("memory_ratify", a, "verdict=ratified checked"),
        ("memory_ratify", a, "verdict=rejected"),
        ("memory_pin", a, "load-bearing"),
        ("memory_pin", a, None),
    ]
    d = dig(store)
    assert d["journal"] == {"chain": "ok", "verified": 6, "out_of_band": 0}
    assert d["audit_events"] == 6


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda s, a: s.review(a, "approved"), InvalidInputError,
         "'proposed', 'ratified', 'rejected'"),
        (lambda s, a: s.review("cap-99", "proposed"), UnknownCapsuleError, "not in this store"),
        (lambda s, a: s.review(a, "ratified", reason="  "), InvalidInputError, "non-blank"),
        (lambda s, a: s.pin("cap-99"), UnknownCapsuleError, "not in this store"),
        (lambda s, a: s.pin(a, pinned="yes"), InvalidInputError, "True or False"),
        (lambda s, a: s.pin(a, reason=""), InvalidInputError, "non-blank"),
    ],
)
def test_bad_review_and_pin_calls_are_refused_and_write_nothing(store, call, error, match):
    a = put(store, "a capsule")
    generation = store.generation
    with pytest.raises(error, match=match):
        call(store, a)
    assert store.generation == generation
    assert store.table("reviews").collect().height == store.table("pins").collect().height == 0


def test_a_forgotten_capsule_takes_no_review_or_pin(store):
    a = put(store, "gone soon")
    store.forget(a)
    for call in (lambda: store.review(a, "proposed"), lambda: store.pin(a)):
        with pytest.raises(UnknownCapsuleError, match="forgotten"):
            call()


def test_frozen_views_refuse_the_verbs(store):
    a = put(store, "x")
    view = store.at(store.generation)
    with pytest.raises(ReadOnlyStoreError):
        view.review(a, "proposed")
    with pytest.raises(ReadOnlyStoreError):
        view.pin(a)


def test_ingest_and_stage_in_one_transaction_is_one_commit(store):
    with store.transaction():
        (a,) = store.ingest({"content": "proposal", "source": "s", "anchor": "x"})
        store.review(a, "proposed")
    assert store.generation == 1
    assert dig(store)["staged"] == {"proposed": 1, "stale_proposals": 0}


def test_schema_models_validate_the_new_tables():
    bad = pl.DataFrame({"seq": [1], "at": [T0], "capsule_id": ["cap-1"], "verdict": ["maybe"],
                        "reason": [None], "actor": ["me"]},
                       schema_overrides={"at": S.TIMESTAMP, "reason": pl.String})
    with pytest.raises(mf.errors.SchemaValidationError, match="verdict"):
        S.validate_frame("reviews", bad)
    assert S.table_schema("pins")["pinned"] == pl.Boolean


# -- row 44: pins surface -------------------------------------------------------------------

def test_44_zero_pins_leave_the_surfaces_pin_free_then_a_pin_surfaces(store):
    a = put(store, "pin me")
    put(store, "other")
    d = dig(store)
    assert "pinned" not in d and "pinned_total" not in d
    assert all("pinned" not in row for row in d["newest"])
    store.pin(a, reason="load-bearing")
    store.record_recall([a])
    d = dig(store)
    assert d["pinned_total"] == 1 and d["pinned"][0]["id"] == a
    assert d["pinned"][0]["pinned"] is True and list(d["pinned"][0])[-1] == "pinned"
    assert d["newest"][1]["id"] == a and d["newest"][1]["pinned"] is True
    assert d["most_recalled"][0]["pinned"] is True  # the flag rides every headline row
    store.pin(a, pinned=False, reason="done")
    d = dig(store)
    assert "pinned" not in d and "pinned_total" not in d


def test_pinned_is_newest_first_capped_at_20_not_n(store):
    pinned = [put(store, f"pinned {i}") for i in range(22)]
    for cid in pinned:
        store.pin(cid)
    for n in (0, 3):
        d = dig(store, headlines=n)
        assert d["pinned_total"] == 22 and len(d["pinned"]) == 20
        assert ids(d["pinned"]) == list(reversed(pinned))[:20]


def test_pinned_rows_honour_the_fence_and_skip_tombstoned_and_staged(store):
    a = put(store, "team pin", project="team")
    b = put(store, "other pin", project="other")
    c = put(store, "forgotten pin", project="team")
    s = put(store, "staged pin", project="team")
    for cid in (a, b, c, s):
        store.pin(cid)
    store.forget(c)
    store.review(s, "proposed")
    assert ids(dig(store)["pinned"]) == [b, a]
    d = dig(store, project_prefix="team")
    assert ids(d["pinned"]) == [a] and d["pinned_total"] == 1
    assert "pinned" not in dig(store, project_prefix="nobody")


def test_pin_vetoes_archiving(store, clock):
    clock.set(T0 - 400 * DAY)
    old = put(store, "old rule")
    clock.set(T0)
    new = put(store, "new rule")
    store.relate(new, old, "supersedes")
    assert dig(store)["archive_candidates"] == 1
    store.pin(old, reason="keep the history")
    assert dig(store)["archive_candidates"] == 0
    store.pin(old, pinned=False)
    assert dig(store)["archive_candidates"] == 1


# -- row 45 and the staged fence ---------------------------------------------------------------

def test_45_proposals_are_carved_out_of_total_and_export_parity_holds(store):
    put(store, "live one")
    put(store, "live two")
    for text in ("proposal one", "proposal two"):
        store.review(put(store, text), "proposed")
    d = dig(store)
    assert d["total"] == 2 and d["newest_total"] == 2
    assert d["staged"] == {"proposed": 2, "stale_proposals": 0}
    state = store.capsule_state().collect()
    live_plus_superseded = state.filter(pl.col("status") != "tombstoned").height
    assert d["total"] == live_plus_superseded - d["staged"]["proposed"]


def test_45_a_proposal_free_digest_has_no_staged_key(store):
    a = put(store, "x")
    assert "staged" not in dig(store)
    store.review(a, "proposed")
    store.review(a, "ratified")
    d = dig(store)
    assert "staged" not in d and d["total"] == 1


def test_staged_capsules_leave_every_capsule_section(store):
    epic = put(store, "ACTIVE(t): staged epic thread", kind="epic")
    task = put(store, "staged task", kind="task")
    sid = store.session_start(PROJECT)
    handoff = store.session_finish(sid, handoff="staged handoff")
    plain = put(store, "truth")
    store.record_recall([epic, task, handoff, plain])
    store.pin(task)
    for cid in (epic, task, handoff):
        store.review(cid, "proposed")
    d = dig(store)
    assert d["total"] == 1 and d["by_project"] == [
        {"project_id": PROJECT, "count": 1, "live": 1}]
    assert ids(d["newest"]) == [plain] and ids(d["most_recalled"]) == [plain]
    for key in ("handoff", "handoff_total", "mission", "unanchored", "pinned", "pinned_total",
                "open_efforts", "open_efforts_total"):
        assert key not in d, key
    # ... and stay in the store-global sections
    assert d["tiers"]["active"] == 4
    assert d["journal"]["out_of_band"] == 0
    assert d["staged"]["proposed"] == 3
    for cid in (epic, task, handoff):
        store.review(cid, "ratified")
    d = dig(store)
    assert d["total"] == 4 and "staged" not in d and ids(d["mission"]["roots"]) == [epic]


def test_rejected_is_still_staged_and_the_latest_verdict_decides(store):
    a = put(store, "x")
    store.review(a, "proposed")
    store.review(a, "ratified")
    store.review(a, "rejected")
    d = dig(store)
    assert d["total"] == 0 and d["staged"]["proposed"] == 1


def test_staged_capsules_stay_in_the_dag(store):
    a, b = put(store, "blocker"), put(store, "blocked")
    store.relate(a, b, "blocks")
    store.review(a, "proposed")
    assert dig(store)["dag"]["ready"] == [a]


def test_staged_is_store_global_under_a_fence(store):
    store.review(put(store, "x", project="other"), "proposed")
    d = dig(store, project_prefix="team")
    assert d["staged"] == {"proposed": 1, "stale_proposals": 0} and d["total"] == 0


def test_a_forgotten_proposal_still_counts_as_proposed(store):
    a = put(store, "withdrawn")
    store.review(a, "proposed")
    store.forget(a)
    assert dig(store)["staged"]["proposed"] == 1


def test_stale_proposals_compare_rfc3339_text_fourteen_days_back(store, clock):
    a = put(store, "proposal")
    store.review(a, "proposed")
    at = store.table("reviews").collect()["at"][0]
    assert dig(store, now=at + 14 * DAY)["staged"]["stale_proposals"] == 0
    assert dig(store, now=at + 14 * DAY + dt.timedelta(seconds=1))["staged"][
        "stale_proposals"] == 1
    # the reference compares text: a whole-second stamp sorts after a fractional one
    # in the same second ('Z' > '.'), so one microsecond later is not yet stale
    assert at.microsecond == 0
    assert dig(store, now=at + 14 * DAY + dt.timedelta(microseconds=1))["staged"][
        "stale_proposals"] == 0
    clock.set(at + 10 * DAY)
    store.review(a, "rejected")  # a newer verdict row restarts the count
    assert dig(store, now=at + 15 * DAY)["staged"]["stale_proposals"] == 0
    assert dig(store, now=at + 25 * DAY)["staged"]["stale_proposals"] == 1


# -- fail-closed, batch parity -----------------------------------------------------------------

def _frames(store) -> dict[str, pl.DataFrame]:
    return {name: store.table(name).collect() for name in S.CANONICAL_TABLES}


@pytest.mark.parametrize(
    ("table", "column", "value"),
    [("reviews", "verdict", "maybe"), ("reviews", "capsule_id", None),
     ("pins", "pinned", None)],
)
def test_corrupt_review_or_pin_rows_fail_the_digest_closed(store, table, column, value):
    a = put(store, "x")
    store.review(a, "proposed")
    store.pin(a)
    frames = _frames(store)
    frames[table] = frames[table].with_columns(
        pl.lit(value, dtype=frames[table].schema[column]).alias(column))
    with pytest.raises(MemframeError, match="^memory_digest failed: "):
        digest_tables(frames, now=T0)
    assert digest_tables(_frames(store), now=T0).to_dict()["staged"]["proposed"] == 1


def test_per_project_digests_equal_fenced_digests_with_reviews_pins_and_efforts(store):
    epic = put(store, "team epic", project="team/a", kind="epic")
    member = put(store, "member elsewhere", project="other")
    store.relate(member, epic, "part_of")
    staged = put(store, "team proposal", project="team/b")
    store.review(staged, "proposed")
    store.pin(member)
    store.pin(epic)
    now = T0 + DAY
    batch = per_project_digests(store, 1, now=now)
    assert sorted(batch) == ["other", "team"]
    for root, digest in batch.items():
        assert digest.to_json() == mf.digest(store, project_prefix=root, now=now).to_json()
    assert batch["team"].to_dict()["open_efforts"][0]["member_total"] == 1


def test_html_view_shows_staged_pinned_and_efforts_escaped(store):
    epic = put(store, "<b>epic</b>", kind="epic")
    store.pin(epic)
    store.review(put(store, "proposal"), "proposed")
    page = mf.digest(store, now=T0)._repr_html_()
    for caption in ("<h2>Tiers, journal and staged review</h2>",
                    '<h2>Pinned <span class="mf-muted">1</span></h2>',
                    '<h2>Open efforts <span class="mf-muted">1</span></h2>'):
        assert caption in page
    assert "<b>epic</b>" not in page and "&lt;b&gt;epic&lt;/b&gt;" in page
