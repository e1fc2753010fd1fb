"""The law at the digest's read interface: every `DigestSource` method answers alike on the
reference source (every row folded now) and on the incremental one (the kept state plus the
rows above its watermark, and the same state folded cold), after every step of random
sessions of every verb (the rules of `tests.digest.machine.DigestMachine`).

The final bytes are compared by the machine's own invariant; this one names the method
that disagrees, so a fault is found where it is made.
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Any

import polars as pl
from hypothesis import HealthCheck, settings
from hypothesis.stateful import invariant

from memframe.digest import reads
from memframe.digest.assemble import subset_sections
from memframe.digest.capsules import resolve_expired
from memframe.digest.scope import SCOPE, fence, population
from memframe.digest.source import DigestSource, TableSource
from memframe.digest.state.kept_source import KeptSource
from tests.digest.machine import DigestMachine

#: (list cap, fence) pairs each step is checked at
PROBES: tuple[tuple[int, str | None], ...] = ((10, None), (2, "nott"), (0, None))

#: the state rows the subset sections may read (the subset, on the state frame's columns)
IN_SUBSET = ((pl.col("source") == "memory_session_finish").fill_null(False)
             | pl.col("thread").is_not_null()
             | pl.col("kind").is_in(["epic", "task"]).fill_null(False)
             | pl.col("pinned").fill_null(False))


def _sorted(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.sort("id")


def _cold(view: Any, now: dt.datetime, n: int, prefix: str | None) -> TableSource:
    """The incremental source folded from every source row, trusting nothing stored."""
    check = reads._chain(view, "incremental")
    return reads._kept(view, now, check.section, check.rows_visited, False, (n, prefix),
                       None, use_kept=True)


def check_state(ref: DigestSource, inc: DigestSource) -> None:
    """``inc.state()`` holds every subset row of the reference's state, each row as the
    reference has it (a headline the kept state does not hold is read when emitted)."""
    full, mine = ref.state(), inc.state()
    assert mine.columns == full.columns
    assert mine.get_column("id").is_unique().all()
    wanted = set(full.filter(IN_SUBSET).get_column("id").to_list())
    held = set(mine.get_column("id").to_list())
    assert wanted <= held, ("state misses subset rows", sorted(wanted - held))
    same = full.filter(pl.col("id").is_in(list(held)))
    assert same.height == mine.height, "state rows the reference does not have"
    keyed = [c for c in full.columns if c != "headline"]
    assert _sorted(mine.select(keyed)).equals(_sorted(same.select(keyed)))
    # a headline is known to one side or both (the other reads the content when it emits)
    both = (_sorted(mine).get_column("headline").is_not_null()
            & _sorted(same).get_column("headline").is_not_null())
    assert _sorted(mine).filter(both).equals(_sorted(same).filter(both))


def check_members(ref: DigestSource, inc: DigestSource, prefix: str | None) -> None:
    lookup = inc.member_scopes(prefix)
    if lookup is None:
        return
    everyone = ref.state().get_column("id")
    expected = fence(population(ref.state()), prefix).select("id", SCOPE)
    assert _sorted(lookup(everyone)).equals(_sorted(expected))


def check_kept(ref: DigestSource, inc: DigestSource, n: int) -> None:
    kept = inc.kept_sections()
    if kept is None:
        return
    scoped = fence(population(ref.state()), None)
    direct = subset_sections(ref, ref.graph(n), scoped, [""], n, None)[""]
    direct = resolve_expired(direct, ref.now)
    assert {key: kept[key] for key in direct} == direct
    graph = ref.graph(n)
    assert (kept["dag"], kept["relations"]) == (graph["dag"], graph["relations"])


def check_sources(ref: DigestSource, inc: DigestSource, n: int, prefix: str | None) -> None:
    """Every protocol method of ``inc`` against ``ref`` (the reference)."""
    assert isinstance(inc, DigestSource) and isinstance(ref, DigestSource)
    assert (inc.now, inc.generation) == (ref.now, ref.generation)
    assert inc.open_sessions(n) == ref.open_sessions(n)
    assert inc.audit_events() == ref.audit_events()
    assert inc.ledger() == ref.ledger()
    assert inc.fail_open() == ref.fail_open()
    assert inc.reviews().sort("seq").equals(ref.reviews().sort("seq"))
    mine, theirs = inc.graph(n), ref.graph(n)
    assert (mine["relations"], mine["dag"]) == (theirs["relations"], theirs["dag"])
    if inc.kept_sections() is None:
        assert mine["dag_projection"] == theirs["dag_projection"]
        check_state(ref, inc)
    check_kept(ref, inc, n)
    check_members(ref, inc, prefix)
    scope = prefix or ""
    ref_scoped = fence(population(ref.state()), prefix)
    inc_scoped = fence(population(inc.state()), prefix)
    assert inc.capsule_sections(inc_scoped, [scope], n) == \
        ref.capsule_sections(ref_scoped, [scope], n)
    rows = ref.state().select("seq", "id").head(5)
    assert inc.attach(rows).equals(ref.attach(rows))
    assert inc.rows_visited() >= 0 and ref.rows_visited() >= 0


class ConformanceMachine(DigestMachine):
    """The machine's sessions, the sources compared method by method after each step."""

    def digest_agrees(self) -> None:  # the bytes are the machine's own test
        pass

    @invariant()
    def sources_agree(self) -> None:
        view = self.store.pinned()
        now = self.clock.now
        for n, prefix in PROBES:
            ref = reads.open_source(view, now, "full", n, prefix, reference=True)
            assert type(ref) is TableSource
            inc = reads.open_source(view, now, "incremental", n, prefix)
            assert isinstance(inc, KeptSource)
            check_sources(ref, inc, n, prefix)
            check_sources(ref, _cold(view, now, n, prefix), n, prefix)
            # verify="full": the cold fold over every row, no kept state read
            full = reads.open_source(view, now, "full", n, prefix)
            assert isinstance(full, KeptSource) and not full.families and full.kept is None
            check_sources(ref, full, n, prefix)


TestSourceConformance = ConformanceMachine.TestCase
TestSourceConformance.settings = settings(
    max_examples=int(os.environ.get("MEMFRAME_CONFORMANCE_EXAMPLES", "6")),
    stateful_step_count=20, deadline=None, suppress_health_check=list(HealthCheck))
