"""The digest's fail-closed row checks (reference 5), in one place: a row the digest cannot
use fails the whole digest, on every path (the reference read, the warm read of the rows
above a watermark, and the jobs, which never fold or keep such rows)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Literal

import polars as pl

from memframe.ids import capsule_number_expr
from memframe.schema import RELATION_KINDS, REVIEW_VERDICTS

__all__ = ["check_rows", "check_tables"]


@functools.cache
def _row_checks() -> dict[str, tuple[dict[str, pl.Expr], str]]:
    """table -> (column -> what makes a row bad in it, the message naming the first bad
    row: ``str.format`` over its columns)."""
    def missing(*columns: str) -> dict[str, pl.Expr]:
        return {c: pl.col(c).is_null() for c in columns}

    return {
        "capsules": ({**missing("seq", "project_id", "created_at", "instruction_taint"),
                      "id": capsule_number_expr(pl.col("id")).is_null()},
                     "corrupt capsule row at seq {seq}"),
        "relations": (missing("from_id", "to_id"), "relation row at seq {seq} has no endpoint"),
        "journal": (missing("at", "audit_seq"), "journal row at seq {seq} has no valid time"),
        "brackets": (missing("at", "session_id"), "a session bracket row has no time or id"),
        "reviews": ({**missing("seq", "capsule_id", "at"),
                     "verdict": ~pl.col("verdict").is_in(list(REVIEW_VERDICTS)).fill_null(False)},
                    "review row at seq {seq} is corrupt (verdict {verdict!r}, capsule "
                    "{capsule_id!r})"),
        "pins": (missing("seq", "capsule_id", "pinned"), "pin row at seq {seq} is corrupt"),
        "_kinds": ({"kind": ~pl.col("kind").is_in(list(RELATION_KINDS)).fill_null(False)},
                   "unknown relation kind {kind!r}"),
    }


def check_tables(tables: Mapping[str, pl.LazyFrame | pl.DataFrame]) -> str | None:
    """What makes the first unusable table of ``tables`` (name -> rows) unusable to the
    digest, or None: THE fail-closed row checks, the same verdict on every path (the
    reference read, the warm read of the rows above the watermark, the job that never
    folds such rows), in one collect. A check of a column a frame does not carry is
    skipped (a reader that does not read a column does not depend on it).

    Examples:
        >>> import polars as pl
        >>> check_tables({"journal": pl.DataFrame({"seq": [4], "at": [None],
        ...                                        "audit_seq": [1]})})
        'journal row at seq 4 has no valid time'
        >>> check_tables({"relations": pl.DataFrame({"seq": [2], "kind": ["likes"],
        ...     "from_id": ["cap-1"], "to_id": ["cap-2"]})})
        "unknown relation kind 'likes'"
        >>> check_tables({"capsules": pl.DataFrame({"seq": [1], "id": ["cap-01"],
        ...     "project_id": ["p"], "created_at": [0], "instruction_taint": [False]})})
        'corrupt capsule row at seq 1'
    """
    checks = _row_checks()
    found: list[pl.LazyFrame] = []
    messages: list[str] = []
    for name, frame in tables.items():
        rows = frame.lazy()
        have = set(rows.collect_schema().names())
        for key in (["_kinds", name] if name == "relations" else [name]):
            columns, what = checks.get(key, ({}, ""))
            bad = [expr for column, expr in columns.items() if column in have]
            if bad:
                found.append(rows.filter(pl.any_horizontal(bad)).head(1))
                messages.append(what)
    # (rows read already: in memory; rows to be read: streamed, never all held)
    engine: Literal["in-memory", "streaming"] = "in-memory" if all(
        isinstance(f, pl.DataFrame) for f in tables.values()) else "streaming"
    collected = pl.collect_all(found, engine=engine) if found else []
    for first, what in zip(collected, messages, strict=True):
        if first.height:
            named = first.row(0, named=True)
            return what.format_map({k: named.get(k) for k in ("seq", "verdict", "capsule_id",
                                                                "kind")})
    return None


def check_rows(name: str, frame: pl.LazyFrame | pl.DataFrame) -> str | None:
    """`check_tables` of one table's rows."""
    return check_tables({name: frame})
