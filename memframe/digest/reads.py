"""The door of the digest: the one place that picks its `DigestSource`, once, and reads
what that source needs from one pinned generation.

* `open_source`: a store's digest, the incremental `KeptSource`: the kept state when it
  is trusted (`_trusted`), else (always under ``verify="full"``) the same state folded
  now from every source row, one range of capsule numbers at a time (the cold digest).
* `whole_source`: every capsule's state, for the per-project batch (the reference
  sections over many fences at once).
* `job_source`: the digest job's own read of its state (it trusts it, no chain check).
* `tables_source`: hand-made canonical tables.

Every table is read at most once per digest call; ``rows_visited`` adds the partition row
counts of each table read. Tables split in two groups (reference 5):

* fail-closed tables: any read error (or a row the digest cannot use) fails the whole
  digest with ``DigestFailedError("memory_digest failed: ...")``;
* fail-open tables (the recall-miss ledger, lane overrides, the git witness tables): a
  read error only marks that table unavailable (None) and the sections built on it
  degrade on their own.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import polars as pl

from memframe.digest.checks import check_tables
from memframe.digest.families import FAMILIES
from memframe.digest.source import TableSource
from memframe.errors import DigestFailedError, MemframeError, MemoryBudgetError
from memframe.schema import empty_of
from memframe.state import STATE_SCHEMA, fold_state, state_frame

__all__ = ["COLUMNS", "FAIL_CLOSED", "FAIL_OPEN", "StateNotWarm", "digest_failed",
           "open_source", "whole_source", "job_source", "tables_source", "reference_state"]

#: columns the digest reads from each table (projection pushdown).
COLUMNS: dict[str, tuple[str, ...]] = {
    "capsules": (
        "seq", "id", "created_at", "project_id", "content", "source", "valid_to",
        "authority_class", "instruction_taint",
    ),
    "relations": ("seq", "kind", "from_id", "to_id"),
    "forgets": ("seq", "at", "capsule_id", "mode"),
    "recalls": ("seq", "at", "capsule_id", "count"),
    "classifications": ("seq", "capsule_id", "kind", "scope"),
    "tiers": ("seq", "capsule_id", "tier"),
    "brackets": ("seq", "at", "session_id", "event"),
    "journal": ("seq", "audit_seq", "at", "actor", "action", "subject", "reason", "chained_hash"),
    "recall_misses": ("seq", "at", "term", "outcome"),
    "lane_overrides": ("seq", "at", "forced", "auto_pick"),
    "corroborations": ("seq", "capsule_id", "source", "kind", "ref", "verdict"),
    "source_cursors": ("seq", "at", "source_key", "cursor"),
    "reviews": ("seq", "at", "capsule_id", "verdict"),
    "pins": ("seq", "capsule_id", "pinned"),
}
FAIL_CLOSED: tuple[str, ...] = (
    "capsules", "relations", "forgets", "recalls", "classifications", "tiers", "brackets",
    "journal", "reviews", "pins",
)
FAIL_OPEN: tuple[str, ...] = ("recall_misses", "lane_overrides", "corroborations", "source_cursors")
#: the fail-closed tables the kept state does not cover: read in full beside it
STATE_TABLES: tuple[str, ...] = ("relations", "brackets", "reviews", "pins")


class StateNotWarm(Exception):
    """`job_source` found no stored digest state (the job never recorded it)."""


def digest_failed(detail: object) -> DigestFailedError:
    """The fail-closed error of the digest (reference 1.1 / 5).

    Examples:
        >>> str(digest_failed("journal: gap"))
        'memory_digest failed: journal: gap'
    """
    return DigestFailedError(f"memory_digest failed: {detail}")


def _check(tables: Mapping[str, pl.LazyFrame | pl.DataFrame]) -> None:
    """The row checks the digest fails on (`memframe.digest.checks.check_tables`, the one
    set every path uses). A table not read here was checked by the job that kept it."""
    problem = check_tables(tables)
    if problem:
        raise digest_failed(problem)


def _guard(what: str, read: Callable[[], Any], other: str | None = None) -> Any:
    """``read()``; its failure fails the digest closed, prefixed ``what`` (a
    `MemframeError`) or ``other`` (any other error; default ``cannot read <what>``)."""
    try:
        return read()
    except (DigestFailedError, StateNotWarm, MemoryBudgetError):
        raise
    except MemframeError as exc:
        raise digest_failed(f"{what}{exc}") from exc
    except Exception as exc:  # noqa: BLE001 - any read error fails the digest closed
        prefix = other if other is not None else f"cannot read {what}"
        raise digest_failed(f"{prefix}{exc}") from exc


def _read_tables(read: Callable[[str], pl.LazyFrame | pl.DataFrame],
                 count: Callable[[str, pl.DataFrame], int], names: Sequence[str],
                 optional_names: Sequence[str], columns: Mapping[str, Sequence[Any]]
                 ) -> tuple[dict[str, pl.DataFrame], dict[str, pl.DataFrame | None], int]:
    """The fail-closed ``names`` (one parallel collect; table by table when it fails, to
    name the table) checked, and the fail-open ``optional_names``; with the rows read."""
    visited = 0
    try:
        frames = [read(name).lazy().select(list(columns[name])) for name in names]
        together = dict(zip(names, pl.collect_all(frames, engine="streaming"), strict=True))
    except Exception:  # noqa: BLE001 - read again table by table for a precise error
        together = {name: _guard(f"{name}: ", _collector(read, name, columns[name]))
                    for name in names}
    for name, frame in together.items():
        visited += count(name, frame)
    _check(together)
    optional: dict[str, pl.DataFrame | None] = {}
    for name in optional_names:
        try:
            frame = read(name).lazy().select(list(COLUMNS[name])).collect()
        except Exception:  # noqa: BLE001 - fail-open leg: only its own keys degrade
            optional[name] = None
            continue
        optional[name] = frame
        visited += count(name, frame)
    return together, optional, visited


def _collector(read: Callable[[str], pl.LazyFrame | pl.DataFrame], name: str,
               columns: Sequence[Any]) -> Callable[[], pl.DataFrame]:
    return lambda: read(name).lazy().select(list(columns)).collect()


def reference_state(tables: Mapping[str, pl.DataFrame]) -> pl.DataFrame:
    """The capsule state of the reference read: THE fold (`memframe.state.fold_state`) of
    every row of the per-capsule tables, as the digest reads it (`state_frame`), with each
    capsule's ``content`` when the tables hold it (else the digest reads the content of
    the rows it emits)."""
    state = state_frame(fold_state(tables))
    if "content" not in tables["capsules"].columns:
        return state
    content = tables["capsules"].select("seq", "content")
    return state.join(content, on="seq", how="left", maintain_order="left")


def _tombstoned(forgets: pl.DataFrame | None) -> pl.Series:
    if forgets is None:
        return pl.Series("capsule_id", [], dtype=pl.String)
    return forgets.get_column("capsule_id").unique().sort()


def tables_source(tables: Mapping[str, pl.LazyFrame | pl.DataFrame], now: _dt.datetime
                  ) -> TableSource:
    """The reference source over hand-made canonical tables (missing ones read as empty);
    ``rows_visited`` is the rows of each table read.

    Examples:
        >>> import datetime as dt
        >>> from memframe.schema import empty_frame
        >>> now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
        >>> tables_source({"capsules": empty_frame("capsules")}, now).rows_visited()
        0
    """
    from memframe.digest.ledger import verify_chain
    from memframe.schema import empty_frame

    def read(name: str) -> pl.LazyFrame | pl.DataFrame:
        frame = tables.get(name)
        return empty_frame(name) if frame is None else frame

    full, optional, visited = _read_tables(read, lambda _n, f: f.height, FAIL_CLOSED,
                                           FAIL_OPEN, COLUMNS)
    state = _guard("", lambda: reference_state(full), "capsule state: ")
    return TableSource(full, optional, state, now,
                       _guard("", lambda: verify_chain(full["journal"]), ""),
                       full["journal"].height, _tombstoned(full["forgets"]), visited)


def _light_columns() -> dict[str, Sequence[Any]]:
    """What a store's digest reads: the chain walk reads the journal rows it verifies
    itself, and the content only of the rows it emits (the ACTIVE() label is taken while
    reading)."""
    from memframe.digest.scope import THREAD_PATTERN

    columns: dict[str, Sequence[Any]] = dict(COLUMNS)
    columns["journal"] = ("seq", "audit_seq", "at", "action", "subject")
    columns["capsules"] = [
        *(c for c in COLUMNS["capsules"] if c != "content"),
        pl.col("content").str.extract(THREAD_PATTERN, 1).alias("thread"),
    ]
    return columns


def _content(view: Any) -> Callable[[list[int]], tuple[pl.DataFrame, int]]:
    def read(seqs: list[int]) -> tuple[pl.DataFrame, int]:
        return _guard("cannot read capsules: ", lambda: view.read_by_seq("capsules", seqs,
                                                             ["seq", "content"]),
                      "cannot read capsules: ")
    return read


def _chain(view: Any, verify: str) -> Any:
    """The journal chain checked from the store's verified checkpoint (or in full)."""
    from memframe.digest.state.journal import check_chain

    return _guard("journal: ", lambda: check_chain(view, verify), "cannot verify the journal: ")


def _trusted(view: Any, verify: str, check: Any) -> bool:
    """Is the kept state trusted: as far as the journal checkpoint is (the verified parts
    are the very files verified), and as far as the canonical parts it folded are the
    files sealed (one stat each)."""
    from memframe.digest.state import digest_capsules

    return verify != "full" and check.walked == "incremental" and digest_capsules.seal_holds(view)


def _reference(view: Any, now: _dt.datetime, check: Any, names: Sequence[str] = FAIL_CLOSED,
               state: Callable[[dict], tuple[pl.DataFrame, int]] | None = None
               ) -> TableSource:
    """The reference source of a store: ``names`` read in full, the state folded from
    them (or given by ``state``, which then also gives the tombstoned ids)."""
    tables, optional, visited = _read_tables(
        view.table, lambda name, _f: int(view.row_count(name)), names, FAIL_OPEN,
        _light_columns())
    if state is None:
        rows = _guard("", lambda: reference_state(tables), "capsule state: ")
        tombstoned, events = _tombstoned(tables["forgets"]), tables["journal"].height
    else:
        rows, n = state(tables)
        visited += n
        tombstoned = (rows.filter(pl.col("status") == "tombstoned")
                      .get_column("id").unique().sort())
        events = int(view.row_count("journal"))
    return TableSource(tables, optional, rows, now, check.section, events, tombstoned,
                       visited + check.rows_visited, view.generation, _content(view))


def whole_source(view: Any, now: _dt.datetime, verify: str) -> TableSource:
    """Every capsule's state, for the per-project batch: the kept state rows plus the rows
    above the watermark when trusted (`memframe.digest.state.warm_reader.read_state`), else
    every row folded (the reference)."""
    from memframe.digest.state import warm_reader

    check = _chain(view, verify)
    if not _trusted(view, verify, check):
        return _reference(view, now, check)

    def state(_tables: dict) -> tuple[pl.DataFrame, int]:
        raw, visited, unfolded = _guard("", lambda: warm_reader.read_state(view), "capsule state: ")
        _check(unfolded)
        return state_frame(raw), visited

    return _reference(view, now, check, STATE_TABLES, state)


def open_source(view: Any, now: _dt.datetime, verify: str, n: int, prefix: str | None,
                reference: bool = False) -> TableSource:
    """The source of one digest (cap ``n``, fence ``prefix``) of a store: see the module
    docstring; ``reference``: the `TableSource` (every capsule's state row, `explain`)."""
    check = _chain(view, verify)
    if reference:
        return _reference(view, now, check)
    trusted = _trusted(view, verify, check)
    shared = {"journal": check.read} if check.read is not None else None
    return _kept(view, now, check.section, check.rows_visited, trusted, (n, prefix),
                 shared, use_kept=verify != "full")


def job_source(view: Any, cap: int, shared: Any = None) -> TableSource:
    """The digest job's read of its own kept state (trusted as the job that keeps it: no
    chain check); raises `StateNotWarm` when there is none."""
    return _kept(view, view.now(), {}, 0, True, (cap, None), shared, use_kept=False,
                 require=True)


def _kept(view: Any, now: _dt.datetime, chain: dict, chain_rows: int, trusted: bool,
          sections: tuple[int, str | None], shared: Any, *, use_kept: bool,
          require: bool = False) -> TableSource:
    """The incremental source: the kept families when trusted, the aggregates, subset and
    top-N readers (stored, or folded now), the kept subset sections when current."""
    from memframe.digest.state import cold_fold, warm_reader
    from memframe.digest.state.kept_source import KeptSource, read_kept_families, top_requests
    from memframe.digest.state.sections import CAP, cap_kept, graph_settled, read_current

    families, visited = read_kept_families(view) if trusted else ({}, 0)
    skip = {t for family in families for t in FAMILIES[family]}
    names = tuple(t for t in (*STATE_TABLES, "forgets") if t not in skip)
    tables, optional, n = _read_tables(
        view.table, lambda name, _f: int(view.row_count(name)), names,
        tuple(t for t in FAIL_OPEN if t not in skip), _light_columns())
    visited += n + chain_rows

    def warm_state() -> Any:
        found: Any = warm_reader.read_warm(view, shared) if trusted else None
        if found is None:  # the job never recorded the aggregates: fold them now
            if require:
                raise StateNotWarm("the digest job never recorded the state")
            found = cold_fold.fold_warm(view, top_requests(*sections))
        _check(found[1])
        return found[0]

    warm = _guard("", warm_state, "capsule state: ")
    kept = None
    if warm.in_memory:  # every source row was read: counted here
        visited, warm.rows_visited = visited + warm.rows_visited, 0
    elif use_kept and sections[1] is None and not warm.subset_changed() \
            and graph_settled(view, "graph" in families):
        values, read = _guard("", lambda: read_current(view, sections[0]), "capsule state: ")
        warm.rows_visited += read
        fresh = getattr(families.get("graph"), "fresh", None)
        if values is not None and fresh is not None:
            values = {**values, "dag": fresh.dag(values["dag"], CAP),
                      "relations": values["relations"] + fresh.relations}
        if values is not None and not values.pop("_member_admission", False):
            kept = cap_kept(values, sections[0], now)  # no section reads the state
    rows = (state_frame(empty_of(STATE_SCHEMA)) if kept is not None
            else _guard("", lambda: state_frame(warm.subset), "capsule state: "))
    # the journal's rows as the log records them, or (when the verified parts could not
    # be confirmed) as the files hold them
    events = int(view.row_count("journal")) if trusted else int(
        view.table("journal").select(pl.len()).collect().item())
    return KeptSource(tables, optional, rows, now, chain, events,
                      _tombstoned(tables.get("forgets")), visited, view.generation,
                      _content(view), warm=warm, kept_families=families, kept=kept)
