"""Bad input, verb by verb: a MemframeError that names what was wrong; nothing written."""

from __future__ import annotations

import polars as pl
import pytest

import memframe as mf
from memframe.errors import MemframeError


@pytest.fixture
def seeded(store):
    store.ingest([{"content": "a", "source": "s", "anchor": "x"},
                  {"content": "b", "source": "s", "anchor": "y"}])
    store.forget("cap-2")
    store.session_start("p")
    return store


CASES = [
    ("missing provenance", lambda s: s.ingest({"content": "c"}), "source, anchor"),
    ("blank anchor", lambda s: s.ingest({"content": "c", "source": "s", "anchor": " "}), "anchor"),
    ("missing content", lambda s: s.ingest({"source": "s", "anchor": "x"}), "content"),
    ("unknown field", lambda s: s.ingest({"content": "c", "source": "s", "anchor": "x",
                                          "colour": "red"}), "colour"),
    ("confidence out of range", lambda s: s.ingest({"content": "c", "source": "s", "anchor": "x",
                                                    "confidence": 1.5}), "0..1"),
    ("unknown kind", lambda s: s.ingest({"content": "c", "source": "s", "anchor": "x",
                                         "kind": "rumour"}), "allowed: 'fact'"),
    ("unknown authority", lambda s: s.ingest({"content": "c", "source": "s", "anchor": "x",
                                              "authority_class": "oracle"}), "observed-fact"),
    ("valid_to before valid_from", lambda s: s.ingest({
        "content": "c", "source": "s", "anchor": "x", "valid_from": "2026-01-02T00:00:00Z",
        "valid_to": "2026-01-01T00:00:00Z"}), "valid_to before valid_from"),
    ("bad timestamp", lambda s: s.ingest({"content": "c", "source": "s", "anchor": "x",
                                          "created_at": "yesterday"}), "RFC3339"),
    ("wrong dtype in a frame", lambda s: s.ingest(pl.DataFrame({
        "content": ["c"], "source": ["s"], "anchor": [7]})), "anchor has dtype Int64"),
    ("wrong confidence dtype", lambda s: s.ingest(pl.DataFrame({
        "content": ["c"], "source": ["s"], "anchor": ["x"], "confidence": ["high"]})), "confidence"),
    ("not rows", lambda s: s.ingest(42), "dict, a list of dicts or a polars DataFrame"),
    ("unknown relation kind", lambda s: s.relate("cap-1", "cap-2", "likes"), "allowed"),
    ("relation to a missing capsule", lambda s: s.relate("cap-1", "cap-3", "blocks"), "cap-3"),
    ("relation from a malformed id", lambda s: s.relate("cap-01", "cap-1", "blocks"), "cap-01"),
    ("self edge", lambda s: s.relate("cap-1", "cap-1", "blocks"), "itself"),
    ("unknown forget mode", lambda s: s.forget("cap-1", mode="burn"), "burn"),
    ("recall of a missing capsule", lambda s: s.record_recall(["cap-9"]), "cap-9"),
    ("unknown miss outcome", lambda s: s.record_miss(["x"], "grounded"), "missing_evidence"),
    ("non-string miss term", lambda s: s.record_miss([3], "abstain"), "strings"),
    ("unknown lane pair", lambda s: s.record_lane_override("term", "term"), "(term, fused)"),
    ("unknown tier", lambda s: s.classify("cap-1", tier="gold"), "quarantined"),
    ("unknown classification", lambda s: s.classify("cap-1", kind="gossip"), "failure_pattern"),
    ("classify nothing", lambda s: s.classify("cap-1"), "kind, a tier"),
    ("blank session project", lambda s: s.session_start("  "), "project"),
    ("finish an unknown session", lambda s: s.session_finish("sess-9"), "never started"),
    ("blank handoff", lambda s: s.session_finish("sess-1", handoff="   "), "blank"),
    ("bad source key", lambda s: s.record_git_scan("repo", "sha"), "git:"),
    ("bad corroboration verdict", lambda s: s.record_git_scan("git:/r", "sha", [
        {"capsule_id": "cap-1", "kind": "mention", "ref": "r", "verdict": "maybe"}]), "drifted"),
    ("summary for a non-text conversation", lambda s: s.commit(
        lambda w: w.record_summary(5, "a summary"), operation="t"), "conversation_id must be text"),
    ("review of a forgotten capsule", lambda s: s.review("cap-2", "proposed"), "forgotten"),
    ("blank pin reason", lambda s: s.pin("cap-1", reason=" "), "reason"),
    ("bulk blank review reason", lambda s: s.append("reviews", {
        "capsule_id": ["cap-1"], "verdict": ["ratified"], "reason": [" "]}), "reason is blank"),
    ("bulk pin of a forgotten capsule", lambda s: s.append("pins", {"capsule_id": ["cap-2"]}),
     "forgotten"),
    ("bulk unknown table", lambda s: s.append("capsules", {"x": [1]}), "ingest"),
    ("bulk bad column", lambda s: s.append("tiers", {"capsule_id": ["cap-1"], "tier": ["gold"]}),
     "tiers.tier"),
]


@pytest.mark.parametrize("name,call,needle", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused_with_a_teaching_error_and_nothing_is_written(seeded, name, call, needle):
    generation = seeded.generation
    files = sorted(p.name for p in seeded.path.rglob("*"))
    with pytest.raises(MemframeError) as info:
        call(seeded)
    assert needle in str(info.value)
    assert seeded.generation == generation
    assert sorted(p.name for p in seeded.path.rglob("*")) == files


def test_a_path_that_is_not_a_store(tmp_path):
    (tmp_path / "memframe.json").write_text('{"format": "other"}')
    with pytest.raises(mf.errors.NotAStoreError, match="names format 'other'"):
        mf.Store.open(tmp_path)


def test_a_naive_clock_is_refused(tmp_path):
    import datetime as dt

    store = mf.Store.create(tmp_path / "s", clock=lambda: dt.datetime(2026, 1, 1))
    with pytest.raises(MemframeError, match="naive datetime"):
        store.ingest({"content": "c", "source": "s", "anchor": "x"})


HUGE_ID = "cap-" + "9" * 5000


@pytest.mark.parametrize("call", [
    lambda s: s.record_recall([HUGE_ID]), lambda s: s.pin(HUGE_ID),
    lambda s: s.relate("cap-1", HUGE_ID, "about"), lambda s: s.review(HUGE_ID, "ratified"),
    lambda s: s.relate(HUGE_ID, "cap-1", "supersedes"), lambda s: mf.explain(s, HUGE_ID)],
    ids=["recall", "pin", "relate to", "review", "relate from", "explain"])
def test_a_huge_unknown_id_is_named_not_echoed_whole(seeded, call):
    before = seeded.generation
    with pytest.raises(mf.errors.UnknownCapsuleError, match="is not in this store") as err:
        call(seeded)
    assert "cap-9999" in str(err.value) and len(str(err.value)) < 400
    assert seeded.generation == before  # nothing written


GOOD = {"content": "fine", "source": "s", "anchor": "x", "project_id": "p",
        "authority_class": "user-stated", "kind": None, "confidence": 0.9, "valid_to": None}
#: one rule of ingest per case: the field made bad in the third row, and what the error says
INGEST_RULES = [
    ("content", "   ", "capsule row 2 lacks content"),
    ("source", None, "capsule row 2 lacks source"),
    ("anchor", "", "capsule row 2 lacks anchor"),
    ("project_id", " ", "capsule row 2 has a blank project_id"),
    ("authority_class", "rumour", "rumour"),
    ("kind", "gossip", "gossip"),
    ("confidence", 1.5, "capsule row 2 has confidence 1.5"),
    ("valid_to", "2000-01-01T00:00:00Z", "capsule row 2 has valid_to before valid_from"),
]


@pytest.mark.parametrize("field,value,needle", INGEST_RULES, ids=[r[0] for r in INGEST_RULES])
def test_ingest_checks_every_field_it_is_given_and_names_the_row(seeded, field, value, needle):
    """Ingest checks only the fields given (the defaults of the others pass): each rule
    still holds for a field given in a batch, and names the first bad row."""
    rows = [dict(GOOD, content=f"fine {i}") for i in range(4)]
    rows[2][field] = value
    rows[3][field] = value
    generation = seeded.generation
    with pytest.raises(MemframeError, match=needle):
        seeded.ingest(rows)
    assert seeded.generation == generation


def test_an_ingest_that_leaves_fields_out_takes_their_defaults(store):
    [cid] = store.ingest({"content": "bare", "source": "s", "anchor": "x"})
    row = store.table("capsules").filter(pl.col("id") == cid).collect().row(0, named=True)
    assert (row["project_id"], row["authority_class"], row["confidence"], row["valid_to"],
            row["instruction_taint"]) == ("default", "agent-inferred", 0.6, None, False)
    assert store.table("classifications").collect().height == 0  # no kind given, none set
    [kinded] = store.ingest({"content": "typed", "source": "s", "anchor": "x",
                             "kind": "decision"})
    got = store.table("classifications").collect()
    assert got.select("capsule_id", "kind").rows() == [(kinded, "decision")]


def test_the_first_broken_rule_is_the_one_named(seeded):
    """Several rules broken at once: the mandatory fields come first, in their order."""
    row = dict(GOOD, source=" ", anchor=" ", project_id=" ", confidence=7.0)
    with pytest.raises(MemframeError, match="capsule row 0 lacks source, anchor"):
        seeded.ingest(row)
    with pytest.raises(MemframeError, match="blank project_id"):
        seeded.ingest(dict(row, source="s", anchor="a"))
