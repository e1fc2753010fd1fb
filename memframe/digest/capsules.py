"""The fenced capsule sections: total, by_project, handoff, newest, most_recalled
(reference 4.2-4.5), and the headline row builder they share (4.16).

All selection (fences, de-duplication, ordering, caps, totals) is Polars over the
scope-tagged population; Python only shapes the at most N emitted rows per list.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Sequence
from typing import Any

import polars as pl

from memframe.digest.scope import SCOPE, per_scope, top_per_scope
from memframe.schema import TIMESTAMP
from memframe.text import headline, rfc3339

__all__ = ["headline_rows", "capsule_sections", "with_content", "resolve_expired",
           "handoff_candidates", "handoff_rows", "recalled_order", "HEADLINE_KEYS",
           "DEFERRED_EXPIRY", "RECALL_EXTRA"]

#: the keys a headline row may carry, in wire order (4.0).
HEADLINE_KEYS = (
    "id", "project_id", "instruction_taint", "created_at", "headline",
    "tier", "expired", "kind", "superseded", "pinned",
)


Attach = Callable[[pl.DataFrame], pl.DataFrame]

#: the key of a deferred ``expired`` flag (`headline_rows` with ``now=None``)
DEFERRED_EXPIRY = "valid_to_ns"
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)

#: what a ``most_recalled`` row carries beyond a headline row (`headline_rows`' ``extra``)
RECALL_EXTRA = (("recall_count", pl.col("recall_count").cast(pl.Int64)),
                ("last_recalled_at", rfc3339(pl.col("last_recalled_at"))))


def resolve_expired(value: Any, now: _dt.datetime) -> Any:
    """A copy of ``value`` (headline rows rendered with ``now=None``, nested in lists and
    dicts) with every deferred ``expired`` flag settled for the instant ``now``: kept
    (``true``) when ``now`` is after the row's ``valid_to``, else dropped, as
    `headline_rows` would have rendered it at ``now``. Lists and dicts are copied, other
    values shared: ``value`` is untouched.

    Examples:
        >>> import datetime as dt
        >>> rows = [{"id": "cap-1", "expired": {"valid_to_ns": 0}, "kind": "task"},
        ...         {"id": "cap-2", "expired": {"valid_to_ns": 2 * 10**18}}]
        >>> resolve_expired(rows, dt.datetime(2026, 1, 1, tzinfo=dt.UTC))
        [{'id': 'cap-1', 'expired': True, 'kind': 'task'}, {'id': 'cap-2'}]
    """
    aware = now if now.tzinfo is not None else now.replace(tzinfo=_dt.UTC)
    now_ns = (aware - _EPOCH) // _dt.timedelta(microseconds=1) * 1000

    def walk(item: Any) -> Any:
        if isinstance(item, list):
            return [walk(element) for element in item]
        if not isinstance(item, dict):
            return item
        out = {}
        for key, element in item.items():
            if key == "expired" and isinstance(element, dict) and DEFERRED_EXPIRY in element:
                if now_ns > element[DEFERRED_EXPIRY]:
                    out[key] = True  # same position: the key order is kept
            else:
                out[key] = walk(element)
        return out

    return walk(value)


def with_content(rows: pl.DataFrame, attach: Attach | None) -> pl.DataFrame:
    """``rows`` with their ``content`` (read for just these rows when it was not read); rows
    that carry their ``headline`` (the digest state's rows whose text was at hand) need
    none: a null ``headline`` (text the state does not keep) reads the content of those
    rows only."""
    if "content" in rows.columns or attach is None:
        return rows
    if "headline" in rows.columns:
        unknown = rows.get_column("headline").is_null()
        if not unknown.any():
            return rows
        index = pl.int_range(pl.len(), dtype=pl.Int64).alias("_row")
        numbered = rows.with_columns(index)
        read = attach(numbered.filter(unknown)).select("_row", "content")
        return numbered.join(read, on="_row", how="left", maintain_order="left").drop("_row")
    return attach(rows)


def headline_rows(
    rows: pl.DataFrame,
    now: _dt.datetime | None,
    extra: Sequence[tuple[str, pl.Expr]] = (),
    attach: Attach | None = None,
) -> list[dict]:
    """Shape capsule rows as headline rows, keys in wire order (reference 4.0 / 4.16).

    Args:
        rows: capsule-state rows (at most N: this loops in Python).
        now: the digest's instant, for the ``expired`` flag; None defers the flag: a row
            with a ``valid_to`` then carries ``expired`` as ``{"valid_to_ns": t}``, which
            `resolve_expired` turns into the flag for a given instant (the kept sections
            of `memframe.digest.state.sections` are rendered once, for any instant).
        extra: ``(key, expression)`` pairs appended after the flags, in order.
        attach: adds ``content`` to rows read without it (the digest of a store reads the
            content of emitted rows only).

    Returns:
        A list of insertion-ordered dicts: ``id``, ``project_id``, ``instruction_taint``,
        ``created_at`` (RFC3339), ``headline``, then ``tier`` (non-active only),
        ``expired`` (true only), ``kind`` (if classified), ``superseded`` (true only),
        ``pinned`` (true only; rows without a ``pinned`` column are unpinned), then the
        extra keys.

    Examples:
        >>> import datetime as dt, polars as pl
        >>> now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
        >>> rows = pl.DataFrame({
        ...     "id": ["cap-1"], "project_id": ["p"], "instruction_taint": [False],
        ...     "created_at": [now], "content": ["first\\nsecond"], "tier": ["archived"],
        ...     "valid_to": [None], "kind": [None], "superseded": [True]},
        ...     schema_overrides={"valid_to": pl.Datetime("ns", "UTC"), "kind": pl.String})
        >>> headline_rows(rows, now)
        [{'id': 'cap-1', 'project_id': 'p', 'instruction_taint': False, 'created_at': '2026-01-01T00:00:00Z', 'headline': 'first…', 'tier': 'archived', 'superseded': True}]
    """
    if rows.height == 0:
        return []
    rows = with_content(rows, attach)
    # the digest state's headline, taken as it is where it is known
    kept = "headline" in rows.columns
    text = "content" in rows.columns
    if kept and not text and rows.get_column("headline").null_count():
        raise ValueError("headline rows without their text and no way to read it")
    shaped = rows.select(
        "id",
        "project_id",
        "instruction_taint",
        rfc3339(pl.col("created_at")).alias("created_at"),
        pl.col("headline") if kept else pl.lit(None, dtype=pl.String).alias("headline"),
        pl.col("content") if text else pl.lit(None, dtype=pl.String).alias("content"),
        "tier",
        (pl.col("valid_to").cast(pl.Int64) if now is None else
         pl.col("valid_to").is_not_null() & (pl.lit(now).cast(TIMESTAMP) > pl.col("valid_to"))
         ).alias("expired"),
        "kind",
        "superseded",
        (pl.col("pinned") if "pinned" in rows.columns else pl.lit(False)).alias("pinned"),
        *[expr.alias(f"_x{i}") for i, (_key, expr) in enumerate(extra)],
    )
    out: list[dict] = []
    for row in shaped.iter_rows(named=True):
        item: dict = {
            "id": row["id"],
            "project_id": row["project_id"],
            "instruction_taint": bool(row["instruction_taint"]),
            "created_at": row["created_at"],
            "headline": (row["headline"] if row["headline"] is not None
                         else headline(row["content"] or "")),
        }
        if row["tier"] is not None and row["tier"] != "active":
            item["tier"] = row["tier"]
        if now is None and row["expired"] is not None:
            item["expired"] = {DEFERRED_EXPIRY: row["expired"]}
        elif now is not None and row["expired"]:
            item["expired"] = True
        if row["kind"] is not None:
            item["kind"] = row["kind"]
        if row["superseded"]:
            item["superseded"] = True
        if row["pinned"]:
            item["pinned"] = True
        for i, (key, _expr) in enumerate(extra):
            item[key] = row[f"_x{i}"]
        out.append(item)
    return out


def _totals(frame: pl.DataFrame) -> dict[str, int]:
    if frame.height == 0:
        return {}
    counts = frame.group_by(SCOPE).len()
    return dict(zip(counts[SCOPE].to_list(), counts["len"].to_list(), strict=True))


def _lists(frame: pl.DataFrame, now: _dt.datetime, extra=(), attach: Attach | None = None
           ) -> dict[str, list[dict]]:
    frame = with_content(frame, attach) if frame.height else frame
    return {scope: headline_rows(part, now, extra) for scope, part in per_scope(frame).items()}


def handoff_candidates(scoped: pl.DataFrame) -> pl.DataFrame:
    """The rows that may hold a handoff slot (reference 4.3): bracket handoffs, and thread
    handoffs that are not superseded (a superseded thread row is retired)."""
    return scoped.filter(
        (pl.col("bracket") | pl.col("thread").is_not_null())
        & ~(pl.col("superseded") & ~pl.col("bracket"))
    )


def recalled_order(scoped: pl.DataFrame) -> pl.DataFrame:
    """The ``most_recalled`` population in its order, before the cap (reference 4.5):
    recalled rows by recall_count desc, last recall desc, seq asc."""
    return scoped.filter(pl.col("last_recalled_at").is_not_null()).sort(
        ["recall_count", "last_recalled_at", "seq"], descending=[True, True, False]
    )


def handoff_rows(scoped: pl.DataFrame) -> pl.DataFrame:
    """The handoff population (reference 4.3), newest first, one row per key.

    A row is a bracket handoff (source ``memory_session_finish``) or a thread handoff
    (content opens ``ACTIVE(<label>)``); superseded thread rows are retired, superseded
    bracket rows stay; per (scope, project, thread-or-null) the newest seq wins.
    """
    candidates = handoff_candidates(scoped)
    newest = candidates.group_by([SCOPE, "project_id", "thread"]).agg(pl.col("seq").max())
    return candidates.join(
        newest, on=[SCOPE, "project_id", "thread", "seq"], how="semi", nulls_equal=True
    ).sort("seq", descending=True)


def capsule_sections(
    scoped: pl.DataFrame,
    scopes: Sequence[str],
    n: int,
    now: _dt.datetime,
    attach: Attach | None = None,
) -> dict[str, dict]:
    """The fenced capsule sections of every scope but the handoffs (the assembler's subset
    sections answer those), keys in wire order.

    Args:
        scoped: the population tagged with ``_scope`` (see ``memframe.digest.scope``).
        scopes: the scopes to answer (a scope with no rows answers the empty sections).
        n: the list cap.
        now: the digest's instant (``expired`` flags).
        attach: adds ``content`` to the emitted rows when the population has none.

    Returns:
        ``{scope: {"total", "by_project", "newest", ["newest_total"], "most_recalled",
        ["most_recalled_total"]}}``.
    """
    totals = _totals(scoped)
    by_project = (
        scoped.group_by([SCOPE, "project_id"])
        .agg(
            pl.len().cast(pl.Int64).alias("count"),
            (~pl.col("superseded")).sum().cast(pl.Int64).alias("live"),
        )
        .sort([SCOPE, "project_id"])
    )
    by_project_lists = {
        scope: part.select("project_id", "count", "live").to_dicts()
        for scope, part in per_scope(by_project).items()
    }

    newest = top_per_scope(scoped.sort("seq", descending=True), n)
    newest_lists = _lists(newest, now, attach=attach)

    recalled = recalled_order(scoped)
    recalled_totals = _totals(recalled)
    recalled_lists = _lists(top_per_scope(recalled, n), now, extra=RECALL_EXTRA, attach=attach)

    out: dict[str, dict] = {}
    for scope in scopes:
        section: dict = {
            "total": totals.get(scope, 0),
            "by_project": by_project_lists.get(scope, []),
        }
        section["newest"] = newest_lists.get(scope, [])
        if totals.get(scope, 0):
            section["newest_total"] = totals[scope]
        section["most_recalled"] = recalled_lists.get(scope, [])
        if recalled_totals.get(scope, 0):
            section["most_recalled_total"] = recalled_totals[scope]
        out[scope] = section
    return out
