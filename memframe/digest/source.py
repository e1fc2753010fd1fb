"""The one read interface of the digest: `DigestSource`, and its reference implementation.

The assembler (`memframe.digest.assemble`) talks to a `DigestSource` only. Two classes
implement it:

* `TableSource`, the reference: every row of the tables the digest reads, with the capsule
  state folded from all of them (the full digest, ``verify="full"``, hand-made tables and
  the per-project batch);
* `memframe.digest.state.kept_source.KeptSource`, the incremental one: the digest job's
  kept state plus the rows above its watermark (the default digest of a store).

The source is picked once, at the door (`memframe.digest.reads`); nothing downstream asks
which one it holds. The conformance test (``tests/digest/test_source_conformance.py``)
calls every method of both on random histories and compares the answers.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import polars as pl

from memframe.digest import counters, families, ledger
from memframe.digest.capsules import capsule_sections
from memframe.graph import cap_projection

__all__ = ["DigestSource", "TableSource", "MemberLookup"]

#: capsule ids -> ``(id, _scope)`` of those the fenced population holds
MemberLookup = Callable[[pl.Series], pl.DataFrame]


@runtime_checkable
class DigestSource(Protocol):
    """What the digest reads, pinned to one generation.

    Attributes:
        now: the instant that feeds the ``expired`` flags and ``archive_candidates``.
        generation: the generation read (None for hand-made tables).
    """

    now: _dt.datetime
    generation: int | None

    def rows_visited(self) -> int:
        """Parquet rows read so far (hand-made tables: their rows)."""
        ...

    def state(self) -> pl.DataFrame:
        """Capsule state rows (`memframe.state.state_frame`) holding at least every row of
        the subset (`memframe.digest.state.digest_subset.subset_expr`): the handoff,
        mission, unanchored, pinned and open-effort sections read nothing else."""
        ...

    def graph(self, n: int) -> dict[str, Any]:
        """``relations`` and ``dag`` (capped at ``n``), and what the mission, unanchored
        and open-effort sections read of the graph: ``mission_graph``,
        ``dag_projection`` and ``efforts`` (None when `kept_sections` answers them)."""
        ...

    def open_sessions(self, n: int) -> tuple[int, list[str]]:
        """``open_sessions`` and the first ``n`` open session ids."""
        ...

    def reviews(self) -> pl.DataFrame:
        """Every review row (``staged`` reads them)."""
        ...

    def audit_events(self) -> int:
        """``audit_events``: the journal's rows."""
        ...

    def ledger(self) -> dict[str, Any]:
        """``tiers``, ``journal`` and ``archive_candidates``."""
        ...

    def fail_open(self) -> dict[str, Any]:
        """``recall_misses``, ``_recent_failures``, ``lane_overrides_total`` and
        ``sources`` (None, or 0 for the miss count, when their tables cannot be read)."""
        ...

    def capsule_sections(self, scoped: pl.DataFrame, scopes: Sequence[str], n: int
                         ) -> dict[str, dict]:
        """``total``, ``by_project``, ``newest`` and ``most_recalled`` (with their totals)
        per scope; ``scoped`` is the fenced population of `state`."""
        ...

    def kept_sections(self) -> dict | None:
        """The unfenced subset sections as the digest job kept them for this digest's cap
        and instant, when they are current; None: the assembler computes them."""
        ...

    def member_scopes(self, prefix: str | None) -> MemberLookup | None:
        """How the board finds an epic's members in the fenced population; None: in the
        scoped population itself (`state` holds every capsule)."""
        ...

    def attach(self, rows: pl.DataFrame) -> pl.DataFrame:
        """``rows`` with their ``content`` (read for these rows only)."""
        ...


class TableSource:
    """The reference `DigestSource`: tables read in full, the state folded from them.

    Args:
        tables: the fail-closed tables (a store's per-project read holds only those its
            sections read beside a state read from the kept runs).
        optional: the fail-open tables, None where the read failed.
        state: every capsule's state row.
        now: the digest's instant.
        chain: the journal chain verdict (reference 4.14).
        audit_events: the journal's row count.
        tombstoned: the tombstoned capsule ids, sorted.
        visited: Parquet rows read.
        generation: the generation read.
        content: reads ``(seq, content)`` of capsule rows by ``seq`` with the rows read
            (None: the state carries ``content``).
    """

    def __init__(self, tables: dict[str, pl.DataFrame],
                 optional: dict[str, pl.DataFrame | None], state: pl.DataFrame,
                 now: _dt.datetime, chain: dict, audit_events: int, tombstoned: pl.Series,
                 visited: int, generation: int | None = None,
                 content: Callable[[list[int]], tuple[pl.DataFrame, int]] | None = None
                 ) -> None:
        self.tables, self.optional, self._state = tables, optional, state
        self.now, self.generation, self.chain = now, generation, chain
        self._audit_events, self._tombstoned = audit_events, tombstoned
        self.visited, self._content = visited, content
        self._texts: dict[int, str | None] = {}
        self._graph: dict[str, Any] | None = None

    def rows_visited(self) -> int:
        return self.visited

    def state(self) -> pl.DataFrame:
        return self._state

    def graph_values(self) -> dict[str, Any]:
        """The graph family's values (`memframe.digest.families.graph_values`), computed
        once per source (its tables do not change)."""
        if self._graph is None:
            self._graph = families.graph_values(self.tables["relations"], self._tombstoned)
        return self._graph

    def graph(self, n: int) -> dict[str, Any]:
        values = self.graph_values()
        return {"relations": values["relations"],
                "dag": cap_projection(values["dag_projection"], n),
                "mission_graph": values["mission_graph"],
                "dag_projection": values["dag_projection"],
                "efforts": values["effort_graph"]}

    def open_sessions(self, n: int) -> tuple[int, list[str]]:
        return counters.open_sessions(self.tables["brackets"], n)

    def reviews(self) -> pl.DataFrame:
        return self.tables["reviews"]

    def audit_events(self) -> int:
        return self._audit_events

    def ledger(self) -> dict[str, Any]:
        state = self._state
        return {"tiers": ledger.tiers_section(state),
                "journal": ledger.journal_section(None, state, self.chain),
                "archive_candidates": ledger.archive_candidates(state, self.now, self.attach)}

    def fail_open(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for family in ("misses", "lanes", "sources"):
            out.update(families.family_values(family, self.optional))
        return out

    def capsule_sections(self, scoped: pl.DataFrame, scopes: Sequence[str], n: int
                         ) -> dict[str, dict]:
        return capsule_sections(scoped, scopes, n, self.now, self.attach)

    def kept_sections(self) -> dict | None:
        return None

    def member_scopes(self, prefix: str | None) -> MemberLookup | None:
        return None

    def attach(self, rows: pl.DataFrame) -> pl.DataFrame:
        if self._content is None or "content" in rows.columns:
            return rows
        seqs = rows.get_column("seq").to_list()
        missing = [s for s in dict.fromkeys(seqs) if s not in self._texts]
        if missing:
            found, n = self._content(missing)
            self.visited += n
            self._texts.update(zip(found["seq"].to_list(), found["content"].to_list(),
                                   strict=True))
        return rows.with_columns(pl.Series("content", [self._texts.get(s) for s in seqs],
                                           dtype=pl.String))
