"""Capsule state at a generation: one row per capsule, derived by exact folds.

The reference engine keeps mutable side tables (usage, classifications, tiers, tombstones,
reviews, pins); memframe appends events and folds them here, in **one fold** that every
reader of capsule state shares: `Store.capsule_state()` (`capsule_state`), the reference
digest and the digest's incremental state (`memframe.digest.state.digest_capsules`, which keeps
the fold's rows and folds new rows into them).

Every canonical row maps to a *partial* keyed by its capsule number (``num``); a stored
state row is a partial too. `fold_state` folds partials with exact, order-independent
terms, one group of columns per source table (`fold_terms`):

* the capsule's own columns come from its (single) ``capsules`` row;
* ``recall_count`` is a sum, ``last_recalled_at`` a max;
* ``kind``/``scope``, ``tier``, ``forget_mode``, ``review_verdict`` and ``pinned`` are the
  latest row by ``seq`` (the partial carries that ``seq``);
* ``erased`` (a redact/purge forget erased the content), ``named`` (a journal row names the
  capsule as its subject), ``forget_named`` (a ``memory_forget``/``memory_merge`` row
  names it) and ``superseded`` (a ``supersedes`` edge targets it) are any-of;
* ``members`` (``part_of`` rows into the capsule) is a sum, ``newest_member`` (their
  highest from-id number) a max.

Because every term is associative and commutative, folding all rows at once, or the rows
above a watermark into stored rows, gives the same rows whatever the batching.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import polars as pl

from memframe.ids import capsule_number_expr
from memframe.schema import (
    ERASING_MODES,
    FORGET_ACTIONS,
    HANDOFF_SOURCE,
    THREAD_PATTERN,
    TIMESTAMP,
    empty_of,
)
from memframe.text import headline_expr

__all__ = [
    "capsule_state",
    "latest_by_seq",
    "fold_state",
    "fold_terms",
    "state_frame",
    "state_columns",
    "population_expr",
    "STATUSES",
    "SOURCES",
    "STATE_SCHEMA",
    "STORED_SCHEMA",
    "TEXT",
    "KEY",
    "STATE_SOURCES",
]

STATUSES = ("live", "superseded", "tombstoned")
#: the fold's key: the capsule number of ``cap-<num>``
KEY = "num"

def latest_by_seq(frame: pl.LazyFrame, *keys: str) -> pl.LazyFrame:
    """Keep, per key, the row with the highest ``seq`` (the "latest row wins" fold).

    Examples:
        >>> import polars as pl
        >>> f = pl.LazyFrame({"seq": [1, 2, 3], "k": ["a", "a", "b"], "v": [10, 20, 30]})
        >>> latest_by_seq(f, "k").sort("k").collect()["v"].to_list()
        [20, 30]
    """
    return frame.filter(pl.col("seq") == pl.col("seq").max().over(list(keys)))


def current_sidecar(table: str, frame: pl.LazyFrame) -> pl.LazyFrame:
    """The current value per capsule of ``event_times`` (the latest row by seq) or
    ``epistemics`` (per field, the latest non-null value by seq: an annotation never
    erases a field it leaves out, as nMEMORY 0.3.0 merges it), with the latest ``at``.

    Examples:
        >>> import polars as pl
        >>> f = pl.LazyFrame({"seq": [1, 2], "at": [1, 2], "capsule_id": ["cap-1"] * 2,
        ...                   "evidence_state": ["observed", None], "proof_hint": [None, "ls"],
        ...                   "stale_if": [None, None]})
        >>> current_sidecar("epistemics", f).collect().row(0)
        ('cap-1', 2, 'observed', 'ls', None)
    """
    if table == "event_times":
        return latest_by_seq(frame, "capsule_id").select(
            "capsule_id", "at", "event_at", "event_from", "event_to")
    if table != "epistemics":
        raise KeyError(f"{table!r} is not a sidecar table (event_times, epistemics)")
    fields = ("evidence_state", "proof_hint", "stale_if")
    return frame.sort("seq").group_by("capsule_id", maintain_order=True).agg(
        pl.col("at").last(), *[pl.col(f).drop_nulls().last() for f in fields])


#: the canonical tables folded into the state, and the columns read from each
SOURCES: dict[str, tuple[str, ...]] = {
    "capsules": ("seq", "id", "created_at", "project_id", "source", "valid_to",
                 "authority_class", "instruction_taint"),
    "recalls": ("seq", "at", "capsule_id", "count"),
    "classifications": ("seq", "capsule_id", "kind", "scope"),
    "tiers": ("seq", "capsule_id", "tier"),
    "forgets": ("seq", "capsule_id", "mode"),
    "journal": ("seq", "audit_seq", "at", "action", "subject"),
    "relations": ("seq", "kind", "from_id", "to_id"),
    "reviews": ("seq", "capsule_id", "verdict"),
    "pins": ("seq", "capsule_id", "pinned"),
}

#: one stored row per capsule number
STATE_SCHEMA = pl.Schema(
    {
        "num": pl.Int64(),
        # the capsule's own columns (null until its capsules row is folded)
        "seq": pl.Int64(),
        "created_at": TIMESTAMP,
        "project_id": pl.String(),
        "bracket": pl.Boolean(),
        # the content opens with an ACTIVE() label (false once erased)
        "threaded": pl.Boolean(),
        # text read from the content: never stored in the state's runs (see `TEXT`)
        "thread": pl.String(),
        "headline": pl.String(),
        "valid_to": TIMESTAMP,
        "external": pl.Boolean(),
        "instruction_taint": pl.Boolean(),
        "guarded": pl.Boolean(),
        # folded events
        "recall_count": pl.Int64(),
        "last_recalled_at": TIMESTAMP,
        "kind": pl.String(),
        "scope": pl.String(),
        "kind_seq": pl.Int64(),
        "tier": pl.String(),
        "tier_seq": pl.Int64(),
        "forget_mode": pl.String(),
        "forget_seq": pl.Int64(),
        "erased": pl.Boolean(),
        "named": pl.Boolean(),
        "forget_named": pl.Boolean(),
        "superseded": pl.Boolean(),
        # ``part_of`` rows into the capsule: how many (rows, so an edge a source wrote
        # twice counts twice: read only as "has members"; ``member_total`` counts the
        # distinct edges, `memframe.digest.efforts`), and the highest from-id number
        "members": pl.Int64(),
        "newest_member": pl.Int64(),
        "review_verdict": pl.String(),
        "review_seq": pl.Int64(),
        "pinned": pl.Boolean(),
        "pin_seq": pl.Int64(),
    }
)

#: the columns taken from a capsule's content: its ACTIVE() label and its headline. They are
#: kept in memory only, never in the state's runs: a stored row reads them back as null
#: (unknown), and they are filled from the subset or the leaders (which keep them, and are
#: rewritten by the cycle that folds an erasure) or from the canonical capsule row
#: (`fill_text`) where a reader needs them
TEXT = ("thread", "headline")
#: what the state's runs store of a row: everything but its text
STORED_SCHEMA = pl.Schema({c: d for c, d in STATE_SCHEMA.items() if c not in TEXT})

#: what a partial without the event carries (the fold's identity for that term)
STATE_DEFAULTS: dict[str, Any] = {"recall_count": 0, "erased": False, "named": False,
                             "forget_named": False, "superseded": False, "members": 0}

_BASE = ("seq", "created_at", "project_id", "bracket", "threaded", "thread", "headline",
         "valid_to",
         "external", "instruction_taint", "guarded")


def _num(column: str) -> pl.Expr:
    return capsule_number_expr(column)


def _latest_group(order: str, **values: pl.Expr
                  ) -> tuple[dict[str, pl.Expr], pl.Expr, list[pl.Expr], pl.Expr]:
    """A group folded by "the latest row by ``seq`` wins": its values and their ``seq``
    (as ``order``), kept from every row."""
    return ({**values, order: pl.col("seq")}, pl.lit(True),
            [*(_latest(name, order) for name in values), pl.col(order).max()],
            pl.col(order).is_not_null())


def _latest(value: str, order: str) -> pl.Expr:
    # the value of the partial with the highest ``order``
    return pl.col(value).sort_by(pl.col(order)).last()


#: source table -> (its partial's columns as expressions over its rows, the rows it keeps,
#: the fold's terms for those columns). Each source fills only its own group of state
#: columns, so each group folds on its own, in narrow frames, and the groups are joined
#: by capsule number at the end.
@functools.cache
def fold_terms() -> dict[str, tuple[dict[str, pl.Expr], pl.Expr, list[pl.Expr], pl.Expr]]:
    """name -> (partial columns, source-row filter, fold terms, "stored row has it"),
    built once (read-only: expressions are values)."""
    always = pl.lit(True)
    return {
        "capsules": (
            {"seq": pl.col("seq"), "created_at": pl.col("created_at"),
             "project_id": pl.col("project_id"),
             "bracket": (pl.col("source") == HANDOFF_SOURCE).fill_null(False),
             "threaded": pl.col("thread").is_not_null(),
             "thread": pl.col("thread"), "headline": pl.col("headline"),
             "valid_to": pl.col("valid_to"),
             "external": (pl.col("authority_class") == "externally-imported").fill_null(False),
             "instruction_taint": pl.col("instruction_taint"), "guarded": pl.col("guarded")},
            always,
            # a capsule has exactly one ``capsules`` row: its columns are taken as they are
            [pl.col(c).first() for c in _BASE],
            pl.col("seq").is_not_null(),
        ),
        "recalls": (
            {"recall_count": pl.col("count"), "last_recalled_at": pl.col("at")},
            always,
            [pl.col("recall_count").sum(), pl.col("last_recalled_at").max()],
            pl.col("last_recalled_at").is_not_null() | (pl.col("recall_count") != 0),
        ),
        "classifications": _latest_group("kind_seq", kind=pl.col("kind"),
                                         scope=pl.col("scope")),
        "tiers": _latest_group("tier_seq", tier=pl.col("tier")),
        "forgets": (
            {"forget_mode": pl.col("mode"), "forget_seq": pl.col("seq"),
             "erased": pl.col("mode").is_in(list(ERASING_MODES))},
            always,
            [_latest("forget_mode", "forget_seq"), pl.col("forget_seq").max(),
             pl.col("erased").any()],
            pl.col("forget_seq").is_not_null(),
        ),
        "journal": (
            {"named": pl.lit(True),
             "forget_named": pl.col("action").is_in(list(FORGET_ACTIONS))},
            always,
            [pl.col("named").any(), pl.col("forget_named").any()],
            pl.col("named").fill_null(False) | pl.col("forget_named").fill_null(False),
        ),
        "relations": (
            {"superseded": pl.col("kind") == "supersedes",
             "members": (pl.col("kind") == "part_of").cast(pl.Int64),
             "newest_member": pl.when(pl.col("kind") == "part_of").then(
                 capsule_number_expr(pl.col("from_id")))},
            pl.col("kind").is_in(["supersedes", "part_of"]),
            [pl.col("superseded").any(), pl.col("members").sum(),
             pl.col("newest_member").max()],
            pl.col("superseded").fill_null(False) | (pl.col("members").fill_null(0) > 0),
        ),
        "reviews": _latest_group("review_seq", review_verdict=pl.col("verdict")),
        "pins": _latest_group("pin_seq", pinned=pl.col("pinned")),
    }


SOURCE_KEY = {"capsules": "id", "journal": "subject", "relations": "to_id"}


def _partials(name: str, frame: pl.LazyFrame) -> pl.LazyFrame:
    """Rows of source ``name`` -> narrow partials (``num`` + that source's columns).

    Rows may carry their capsule number (``num``) in place of the key column it is read
    from (the cold fold's narrowed rows, `_narrow`)."""
    columns, keep, _terms, _has = fold_terms()[name]
    key = SOURCE_KEY.get(name, "capsule_id")
    have = frame.collect_schema().names()
    num = (pl.col(KEY) if KEY in have and key not in have else _num(key)).alias(KEY)
    return (frame.filter(keep).select(
        num, *[expr.cast(STATE_SCHEMA[c]).alias(c) for c, expr in columns.items()])
        .filter(pl.col(KEY).is_not_null()))


def fold_state(sources: Mapping[str, pl.LazyFrame | pl.DataFrame],
               existing: pl.LazyFrame | pl.DataFrame | None = None, *,
               engine: str = "in-memory") -> pl.DataFrame:
    """THE fold of the digest state: canonical rows (and stored rows) -> state rows.

    The rebuild calls it with every row of the source tables; the cycle and a warm digest
    with the rows above the watermark and the stored rows of the numbers they touch. Each
    source fills its own group of columns; a group folds its partials (and the stored
    rows' values of those columns) with its exact terms, and the groups are joined by
    capsule number.

    Args:
        sources: table name -> its rows (``capsules`` rows carry ``content``, or the
            ``thread``, ``headline`` and ``guarded`` read from it); missing tables are
            empty.
        existing: stored state rows to fold with them, or None.
        engine: the Polars engine.

    Returns:
        State rows (``STATE_SCHEMA``), one per capsule number named, sorted by number.

    Examples:
        >>> import datetime as dt, polars as pl
        >>> t = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
        >>> caps = pl.DataFrame({"seq": [1], "id": ["cap-1"], "created_at": [t],
        ...     "project_id": ["p"], "source": ["note"], "valid_to": [None],
        ...     "authority_class": ["user-stated"], "instruction_taint": [False],
        ...     "content": ["ACTIVE(x): go"]},
        ...     schema_overrides={"valid_to": pl.Datetime("ns", "UTC")})
        >>> recalls = pl.DataFrame({"seq": [2, 3], "at": [t, t], "capsule_id": ["cap-1"] * 2,
        ...                         "count": [1, 2]})
        >>> fold_state({"capsules": caps, "recalls": recalls}).select(
        ...     "num", "thread", "recall_count").rows()
        [(1, 'x', 3)]
    """
    groups = fold_terms()
    stored = existing.lazy() if existing is not None else None
    folded: list[pl.LazyFrame] = []
    for name, (columns, _keep, terms, has) in groups.items():
        pieces = []
        frame = sources.get(name)
        if frame is not None:
            frame = frame.lazy()
            if name == "capsules":
                frame = with_content_columns(frame)
            pieces.append(_partials(name, frame))
        if stored is not None:
            pieces.append(stored.filter(has).select(KEY, *columns))
        if not pieces:
            continue
        rows = pl.concat(pieces, how="vertical") if len(pieces) > 1 else pieces[0]
        if name == "capsules" and len(pieces) == 1:
            folded.append(rows)  # one row per capsule already
        else:
            folded.append(rows.group_by(KEY).agg(terms))
    if not folded:
        return empty_of(STATE_SCHEMA)
    collected = []
    if engine == "in-memory":  # the rows since a watermark: every group in one collect
        for frame in pl.collect_all(folded, engine="in-memory"):
            collected.append(frame if frame.get_column(KEY).is_sorted() else frame.sort(KEY))
    else:  # one group at a time: the peak is the largest group's, not their sum
        for group in folded:
            frame = group.collect(engine=engine)  # type: ignore[call-overload]
            collected.append(frame if frame.get_column(KEY).is_sorted() else frame.sort(KEY))
            del frame
    joined = _join_groups(collected)
    # every state column in its type, defaults for the groups no row filled (a column
    # already right is taken as it is: no copy of it at any size)
    typed = [pl.lit(STATE_DEFAULTS.get(name), dtype=dtype).alias(name) for name, dtype in
             STATE_SCHEMA.items() if name not in joined]
    for name, series in joined.items():
        value = pl.col(name) if series.dtype == STATE_SCHEMA[name] else \
            pl.col(name).cast(STATE_SCHEMA[name])
        if name in STATE_DEFAULTS and series.null_count():
            value = value.fill_null(pl.lit(STATE_DEFAULTS[name], dtype=STATE_SCHEMA[name]))
        typed.append(value)
    # an erased capsule's content is gone: what was read from it reads as from no content
    # (as a rebuild, which reads the erased content, finds it)
    erased = pl.col("erased")
    return pl.DataFrame(list(joined.values())).lazy().with_columns(typed).select(
        list(STATE_SCHEMA)).with_columns(
        pl.when(erased).then(pl.lit(None, dtype=pl.String)).otherwise(pl.col("thread"))
        .alias("thread"),
        pl.when(erased & pl.col("seq").is_not_null()).then(pl.lit(False)).otherwise(
            pl.col("threaded")).alias("threaded"),
        pl.when(erased & pl.col("seq").is_not_null()).then(pl.lit("")).otherwise(
            pl.col("headline")).alias("headline"),
        pl.when(erased & pl.col("seq").is_not_null()).then(pl.lit(False)).otherwise(
            pl.col("guarded")).alias("guarded"),
    ).collect(engine="in-memory")


def _join_groups(groups: list[pl.DataFrame]) -> dict[str, pl.Series]:
    """Join folded column groups by capsule number (a full join), in place of joins that
    would copy the wide frame once per group: every group is aligned to the sorted union
    of numbers (a group that already is, like the capsules' own, is taken as it is) and
    its aligned columns are collected by name; each group is let go once aligned."""
    nums = (pl.concat([g.select(KEY) for g in groups]).unique().sort(KEY)
            if len(groups) > 1 else groups[0].select(KEY).sort(KEY))
    numbers = nums.get_column(KEY)
    columns: dict[str, pl.Series] = {KEY: numbers}
    while groups:
        group = groups.pop(0)
        if group.height == numbers.len() and group.get_column(KEY).equals(numbers):
            aligned = group
        else:
            aligned = nums.join(group, on=KEY, how="left", maintain_order="left")
        del group
        for name in aligned.columns:
            if name != KEY:
                columns[name] = aligned.get_column(name)
        del aligned
    return columns


def with_content_columns(capsules: pl.LazyFrame) -> pl.LazyFrame:
    """Capsule rows with ``thread``, ``headline`` and ``guarded`` (taken from ``content``
    when the rows carry it rather than the values read with them).

    Rows read with their ACTIVE() label but without their content (a digest reads the
    content of the rows it emits only) carry ``headline`` and ``guarded`` as unknown
    (null), as a stored state row does."""
    have = capsules.collect_schema().names()
    derived = {"thread": pl.col("content").str.extract(THREAD_PATTERN, 1),
               "headline": headline_expr(pl.col("content")), "guarded": guarded_expr()}
    missing = [name for name in derived if name not in have]
    if not missing:
        return capsules
    if "content" in have:
        return capsules.with_columns(derived[name].alias(name) for name in missing)
    if "thread" not in have:
        raise ValueError("capsule rows need their content, or at least their ACTIVE() label")
    return capsules.with_columns(
        pl.lit(None, dtype=STATE_SCHEMA[name]).alias(name) for name in missing)


def guarded_expr() -> pl.Expr:
    """The quarantine guard of the archive planner (reference 4.15): tainted, externally
    imported, and the taint scanner finds something in the content (scanned only for
    the tainted imports). Content is erased only by a forget, after which the capsule is
    never a candidate, so the value taken at ingest stays exact."""
    from memframe.taint import has_finding

    suspect = (pl.col("instruction_taint").fill_null(False)
               & (pl.col("authority_class") == "externally-imported").fill_null(False))
    # the scanner runs on the suspects' content only (everyone else's reads as empty)
    return has_finding(pl.when(suspect).then(pl.col("content"))) & suspect


@functools.cache
def has_base() -> pl.Expr:
    """A state row whose capsule row was folded (events may name a capsule before it)."""
    return pl.col("seq").is_not_null()


@functools.cache
def alive_expr() -> pl.Expr:
    """Not tombstoned (and a capsule row exists)."""
    return has_base() & pl.col("forget_mode").is_null()


@functools.cache
def staged_expr() -> pl.Expr:
    """Inside the review fence (reference 2.1): the latest review row is not ``ratified``."""
    return pl.col("review_verdict").is_not_null() & (pl.col("review_verdict") != "ratified")


@functools.cache
def population_expr() -> pl.Expr:
    """THE capsule population of the digest (reference 4.1: not tombstoned, not staged),
    over state rows; `state_frame` carries it as ``in_population``."""
    return alive_expr() & ~staged_expr()


def state_frame(state: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
    """State rows -> the digest's capsule state (`memframe.state.capsule_state`'s columns
    that the digest reads, plus ``staged``, ``pinned`` and the journal coverage flags),
    for the capsules that have a row, in ``seq`` order.

    ``source``/``authority_class`` are given back as the only values the digest compares
    them with (``memory_session_finish`` / ``externally-imported``), null otherwise.
    """
    if isinstance(state, pl.DataFrame) and not state.height:
        return _empty_state_frame()
    return (
        state.lazy().filter(pl.col("seq").is_not_null())
        .select(state_columns())
        .sort("seq")
        .collect(engine="in-memory")
    )


@functools.cache
def _empty_state_frame() -> pl.DataFrame:
    return empty_of(STATE_SCHEMA).lazy().select(state_columns()).collect()


@functools.cache
def state_columns() -> tuple[pl.Expr, ...]:
    """The expressions of `state_frame` (state row -> digest capsule-state row), built
    once (expressions are values)."""
    superseded = pl.col("superseded").fill_null(False)
    return (
        # ids are ``cap-<num>`` (a capsule row whose id is not is never folded)
        pl.col("seq"), pl.format("cap-{}", pl.col(KEY)).alias("id"), pl.col("created_at"),
        pl.col("project_id"),
        pl.when(pl.col("bracket")).then(pl.lit(HANDOFF_SOURCE)).otherwise(pl.lit(None))
        .cast(pl.String).alias("source"),
        pl.col("valid_to"),
        pl.when(pl.col("external")).then(pl.lit("externally-imported"))
        .otherwise(pl.lit(None)).cast(pl.String).alias("authority_class"),
        pl.col("instruction_taint"),
        pl.when(pl.col("erased")).then(pl.lit(None)).otherwise(pl.col("thread"))
        .cast(pl.String).alias("thread"),
        pl.when(pl.col("erased")).then(pl.lit("")).otherwise(pl.col("headline"))
        .cast(pl.String).alias("headline"),
        superseded.alias("superseded"),
        pl.col("forget_mode"),
        pl.col("recall_count").fill_null(0),
        pl.col("last_recalled_at"),
        pl.col("kind"),
        pl.col("scope"),
        pl.col("tier").fill_null("active"),
        pl.when(pl.col("forget_mode").is_not_null()).then(pl.lit("tombstoned"))
        .when(superseded).then(pl.lit("superseded"))
        .otherwise(pl.lit("live")).alias("status"),
        pl.col("named"),
        pl.col("forget_named"),
        staged_expr().alias("staged"),
        population_expr().alias("in_population"),
        pl.col("pinned").fill_null(False).alias("pinned"),
        pl.col("members").fill_null(0).alias("member_total"),
        pl.col("newest_member"),
    )


#: the groups of the fold that `capsule_state` reports, and the columns it takes of them
_PUBLIC_GROUPS: dict[str, tuple[str, ...]] = {
    "relations": ("superseded",),
    "forgets": ("forget_mode",),
    "recalls": ("recall_count", "last_recalled_at"),
    "classifications": ("kind", "scope"),
    "tiers": ("tier",),
}
#: the tables `capsule_state` reads
STATE_SOURCES = ("capsules", *_PUBLIC_GROUPS)


def capsule_state(tables: Mapping[str, pl.LazyFrame]) -> pl.LazyFrame:
    """One row per capsule: its columns plus status, usage, kind and effective tier.

    The events are folded by `fold_state`'s terms (the one fold), group by group, and
    joined to the capsule rows by capsule number.

    Args:
        tables: the canonical tables at one generation (name -> LazyFrame), as
            ``Store.tables()`` returns them.

    Returns:
        A LazyFrame in ``seq`` order with the capsule columns and ``status``
        (live / superseded / tombstoned), ``superseded`` (bool, also for
        tombstoned capsules), ``forget_mode``, ``recall_count``,
        ``last_recalled_at``, ``kind``, ``scope`` and ``tier``.

    Examples:
        >>> import memframe as mf, tempfile, os
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> a, b = store.ingest([
        ...     {"content": "old", "source": "note", "anchor": "a"},
        ...     {"content": "new", "source": "note", "anchor": "a"}])
        >>> store.relate(b, a, "supersedes")
        >>> store.capsule_state().select("id", "status").collect().rows()
        [('cap-1', 'superseded'), ('cap-2', 'live')]
    """
    terms = fold_terms()
    out = tables["capsules"].with_columns(capsule_number_expr("id").alias(KEY))
    for name, columns in _PUBLIC_GROUPS.items():
        _columns, _keep, fold, _has = terms[name]
        folded = _partials(name, tables[name].lazy()).group_by(KEY).agg(fold)
        out = out.join(folded.select(KEY, *columns), on=KEY, how="left")
    return _public_state(out)


def capsule_state_of(capsules: pl.LazyFrame, folded: pl.LazyFrame) -> pl.LazyFrame:
    """`capsule_state` of the ``capsules`` rows given, their events already folded:
    ``folded`` holds state rows (`STATE_SCHEMA`, at least ``num`` and the folded
    columns) of those capsules, such as the digest's kept state keeps."""
    columns = [c for group in _PUBLIC_GROUPS.values() for c in group]
    out = capsules.with_columns(capsule_number_expr("id").alias(KEY)).join(
        folded.select(KEY, *columns), on=KEY, how="left")
    return _public_state(out)


def _public_state(out: pl.LazyFrame) -> pl.LazyFrame:
    """Capsule rows joined with their folded columns (and ``num``) -> `capsule_state`."""
    return (
        out.drop(KEY)
        .with_columns(
            pl.col("superseded").fill_null(False),
            pl.col("recall_count").fill_null(0),
            pl.col("tier").fill_null("active"),
        )
        .with_columns(
            pl.when(pl.col("forget_mode").is_not_null())
            .then(pl.lit("tombstoned"))
            .when(pl.col("superseded"))
            .then(pl.lit("superseded"))
            .otherwise(pl.lit("live"))
            .alias("status")
        )
        .sort("seq")
    )


