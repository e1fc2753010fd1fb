"""Law: any sequence of verbs writes the same rows as the same events through `Store.append`.

Row for row (every column, ``at`` and ``seq`` included) and journal byte for byte (the
chained hashes), including forgotten and unknown targets, repeats and refusals; and one
batch of events (repeats of a capsule inside it included) writes what the same verbs write
one after another in one transaction.
"""

from __future__ import annotations

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memframe as mf
from memframe import schema as S
from memframe.errors import MemframeError
from tests.conftest import TickingClock

IDS = [f"cap-{n}" for n in range(1, 7)]  # the store holds cap-1..cap-5: cap-6 is unknown

VERB_OPS = {
    "relate": st.tuples(st.just("relate"), st.sampled_from(IDS), st.sampled_from(IDS),
                        st.sampled_from(["blocks", "supersedes", "part_of", "derived_from"])),
    "forget": st.tuples(st.just("forget"), st.sampled_from(IDS),
                        st.sampled_from(["tombstone", "redact", "purge"]),
                        st.one_of(st.none(), st.text(max_size=8))),
    "recall": st.tuples(st.just("recall"), st.sampled_from(IDS)),
    "kind": st.tuples(st.just("kind"), st.sampled_from(IDS),
                      st.sampled_from(["fact", "task", "epic"])),
    "tier": st.tuples(st.just("tier"), st.sampled_from(IDS), st.sampled_from(S.TIERS)),
    "review": st.tuples(st.just("review"), st.sampled_from(IDS),
                        st.sampled_from(S.REVIEW_VERDICTS),
                        st.one_of(st.none(), st.sampled_from(["looks right", " ", "why"]))),
    "pin": st.tuples(st.just("pin"), st.sampled_from(IDS), st.booleans(),
                     st.one_of(st.none(), st.sampled_from(["keep", ""]))),
    "teach": st.tuples(st.just("teach"), st.sampled_from(["pg", "PG ", "Café", " "]),
                       st.sampled_from(["postgres", "Postgres", "cafe", "pg"])),
}
ops = st.one_of(*VERB_OPS.values())

def by_verb(store: mf.Store, op: tuple) -> None:
    match op:
        case ("relate", a, b, kind):
            store.relate(a, b, kind)
        case ("forget", a, mode, reason):
            store.forget(a, mode=mode, reason=reason)
        case ("recall", a):
            store.record_recall([a])
        case ("kind", a, kind):
            store.classify(a, kind=kind)
        case ("tier", a, tier):
            store.classify(a, tier=tier)
        case ("review", a, verdict, reason):
            store.review(a, verdict, reason=reason)
        case ("pin", a, pinned, reason):
            store.pin(a, pinned=pinned, reason=reason)
        case ("teach", term, alias):
            store.teach_alias(term, alias)


def by_bulk(store: mf.Store, op: tuple) -> None:
    match op:
        case ("relate", a, b, kind):
            store.append("relations", {"kind": [kind], "from_id": [a], "to_id": [b]})
        case ("forget", a, mode, reason):
            store.append("forgets", pl.DataFrame({"capsule_id": [a], "mode": [mode],
                                                  "reason": [reason]},
                                                 schema_overrides={"reason": pl.String}))
        case ("recall", a):
            store.append("recalls", {"capsule_id": [a]})
        case ("kind", a, kind):
            store.append("classifications", {"capsule_id": [a], "kind": [kind]})
        case ("tier", a, tier):
            store.append("tiers", {"capsule_id": [a], "tier": [tier]})
        case ("review", a, verdict, reason):
            store.append("reviews", pl.DataFrame({"capsule_id": [a], "verdict": [verdict],
                                                  "reason": [reason]},
                                                 schema_overrides={"reason": pl.String}))
        case ("pin", a, pinned, reason):
            store.append("pins", pl.DataFrame({"capsule_id": [a], "pinned": [pinned],
                                               "reason": [reason]},
                                              schema_overrides={"reason": pl.String}))
        case ("teach", term, alias):
            store.append("recall_aliases", {"term": [term], "alias": [alias]})


def run(path, ops_list, apply) -> tuple[mf.Store, list[str | None]]:
    store = mf.Store.create(path, clock=TickingClock())
    store.ingest([{"content": f"c{i}", "source": "s", "anchor": "a"} for i in range(5)])
    outcomes = []
    for op in ops_list:
        try:
            apply(store, op)
            outcomes.append(None)
        except MemframeError as exc:
            outcomes.append(type(exc).__name__)
    return store, outcomes


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops_list=st.lists(ops, min_size=1, max_size=12))
def test_verbs_and_bulk_write_the_same_rows_and_journal(tmp_path_factory, ops_list):
    verbs, said_verbs = run(tmp_path_factory.mktemp("v") / "s", ops_list, by_verb)
    bulk, said_bulk = run(tmp_path_factory.mktemp("b") / "s", ops_list, by_bulk)
    assert said_verbs == said_bulk  # the same refusals, by the same error class
    for table in S.CANONICAL_TABLES:
        left = verbs.table(table).collect().sort("seq")
        right = bulk.table(table).collect().sort("seq")
        assert left.equals(right), table


class _Recorder:
    """Stands in for a store: keeps the one-op frame `by_bulk` would append."""

    def append(self, table: str, rows) -> None:
        self.table = table
        self.frame = rows if isinstance(rows, pl.DataFrame) else pl.DataFrame(rows)


def batch_of(ops_list: list[tuple]) -> tuple[str, pl.DataFrame]:
    """The ops' rows as one frame of their (single) table, in order."""
    frames = []
    recorder = _Recorder()
    for op in ops_list:
        by_bulk(recorder, op)  # type: ignore[arg-type]
        frames.append(recorder.frame)
    return recorder.table, pl.concat(frames, how="vertical_relaxed")


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(verb=st.sampled_from(sorted(VERB_OPS)), data=st.data())
def test_one_batch_writes_what_its_verbs_write_in_one_transaction(tmp_path_factory, verb, data):
    # repeats of one capsule inside a batch are the point: draw few ids, several rows
    ops_list = data.draw(st.lists(VERB_OPS[verb], min_size=2, max_size=8))
    table, frame = batch_of(ops_list)

    def as_verbs(store: mf.Store) -> None:
        with store.transaction():
            for op in ops_list:
                by_verb(store, op)

    verbs, said_verbs = run(tmp_path_factory.mktemp("v") / "s", [None], lambda s, _: as_verbs(s))
    bulk, said_bulk = run(tmp_path_factory.mktemp("b") / "s", [None],
                          lambda s, _: s.append(table, frame))
    assert (said_verbs[0] is None) == (said_bulk[0] is None)  # both land, or both refuse
    for name in S.CANONICAL_TABLES:
        left = verbs.table(name).collect().sort("seq")
        right = bulk.table(name).collect().sort("seq")
        assert left.equals(right), name
