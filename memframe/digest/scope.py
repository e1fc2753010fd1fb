"""The capsule population of the fenced sections, tagged with the fence it answers.

Every fenced section is computed as a group-by over a ``_scope`` column, so one digest
(one scope: the prefix, or ``""`` when unfenced) and a per-project batch (one scope per
subtree root, a capsule appearing once under every root whose fence holds it) run the
same code and give the same bytes.
"""

from __future__ import annotations

import polars as pl

from memframe.schema import HANDOFF_SOURCE, THREAD_PATTERN

__all__ = [
    "THREAD_PATTERN",
    "SCOPE",
    "HANDOFF_SOURCE",
    "population",
    "fence",
    "fence_expr",
    "subtree_roots",
    "explode_roots",
    "top_per_scope",
    "per_scope",
]

SCOPE = "_scope"


def population(state: pl.DataFrame) -> pl.DataFrame:
    """``all`` of reference 4.1, unfenced: the capsules of the population (non-tombstoned,
    outside the review fence: `memframe.state.population_expr`, which the capsule-state
    frame carries as ``in_population``), ascending seq, with ``bracket`` (provenance source
    is ``memory_session_finish``).

    Examples:
        >>> import polars as pl
        >>> s = pl.DataFrame({"seq": [1, 2, 3], "in_population": [True, False, False],
        ...                   "thread": ["t", None, None], "source": ["note"] * 3})
        >>> population(s).select("seq", "thread", "bracket").rows()
        [(1, 't', False)]
    """
    return (
        state.filter(pl.col("in_population"))
        .with_columns((pl.col("source") == HANDOFF_SOURCE).fill_null(False).alias("bracket"))
        .sort("seq")
    )


def fence_expr(prefix: str) -> pl.Expr:
    """``project_id == prefix`` or ``project_id`` starts with ``prefix + "/"``.

    Examples:
        >>> import polars as pl
        >>> df = pl.DataFrame({"project_id": ["nott", "nott/x", "nottx"]})
        >>> df.filter(fence_expr("nott"))["project_id"].to_list()
        ['nott', 'nott/x']
    """
    col = pl.col("project_id")
    return (col == prefix) | col.str.starts_with(prefix + "/")


def fence(frame: pl.DataFrame, prefix: str | None) -> pl.DataFrame:
    """Tag ``frame`` with one scope: the prefix's fence, or everything under ``""``."""
    if prefix is None:
        return frame.with_columns(pl.lit("").alias(SCOPE))
    return frame.filter(fence_expr(prefix)).with_columns(pl.lit(prefix).alias(SCOPE))


def _cut(depth: int) -> pl.Expr:
    return pl.col("project_id").str.split("/").list.head(depth).list.join("/")


def _valid_root(expr: pl.Expr) -> pl.Expr:
    return (expr.str.strip_chars().str.len_chars() > 0) & ~expr.str.ends_with("/")


def subtree_roots(frame: pl.DataFrame, depth: int) -> list[str]:
    """Distinct project ids cut at ``depth`` path segments, sorted byte-wise.

    A cut that could not be passed as a ``project_prefix`` (blank, or ending with ``/``
    because the id has an empty segment) is skipped.

    Examples:
        >>> import polars as pl
        >>> df = pl.DataFrame({"project_id": ["team/api/v2", "team/web", "solo", "team"]})
        >>> subtree_roots(df, 2)
        ['solo', 'team', 'team/api', 'team/web']
    """
    cuts = frame.select(_cut(depth).alias("root")).unique()
    cuts = cuts.filter(_valid_root(pl.col("root")) & pl.col("root").is_not_null())
    return cuts.get_column("root").sort().to_list()


def explode_roots(frame: pl.DataFrame, roots: list[str], depth: int) -> pl.DataFrame:
    """One row per (capsule, root whose fence holds it): the capsule's ancestors at
    1..depth segments that are roots. Equal to ``fence(frame, root)`` for each root."""
    candidates = pl.concat_list([_cut(k) for k in range(1, depth + 1)]).list.unique()
    return (
        frame.with_columns(candidates.alias(SCOPE))
        .explode(SCOPE)
        .filter(pl.col(SCOPE).is_in(pl.Series(roots, dtype=pl.String).implode()))
    )


def top_per_scope(frame: pl.DataFrame, n: int) -> pl.DataFrame:
    """The first ``n`` rows of each scope, in the frame's current order."""
    if n == 0 or frame.height == 0:
        return frame.head(0)
    return frame.filter(pl.int_range(pl.len()).over(SCOPE) < n)


def per_scope(frame: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """Split a scope-tagged frame into ``{scope: rows}`` (order within a scope kept)."""
    if frame.height == 0:
        return {}
    return {
        key[0]: part
        for key, part in frame.partition_by(SCOPE, as_dict=True, maintain_order=True).items()
    }
