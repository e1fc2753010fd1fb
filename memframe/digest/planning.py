"""The graph sections: dag (reference 4.10), mission (4.11) and unanchored (4.12).

The graph work lives in :mod:`memframe.graph`; this module applies the fences.
``dag``, the mission cycle check and the mission ``children`` counts are store-global;
the mission roots and ``unanchored`` honour ``project_prefix``.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence

import polars as pl

from memframe.digest.capsules import Attach, headline_rows, with_content
from memframe.digest.scope import SCOPE, per_scope, top_per_scope
from memframe.graph import MissionGraph, mission_graph

__all__ = ["mission_graph", "mission_sections", "unanchored_sections", "root_candidates",
           "unanchored_candidates"]


def _anchored(graph: MissionGraph) -> pl.Expr:
    return pl.col("id").is_in(graph.grounded_from.implode())


def root_candidates(scoped: pl.DataFrame, graph: MissionGraph) -> pl.DataFrame:
    """The mission-root population before the cap (reference 4.11): live ``epic`` rows of
    the scope with no live-parent anchoring ``grounded_in`` edge, newest first."""
    return scoped.filter(
        (pl.col("kind") == "epic").fill_null(False)
        & ~pl.col("superseded")
        & ~_anchored(graph)
    ).sort("seq", descending=True)


def unanchored_candidates(scoped: pl.DataFrame, graph: MissionGraph) -> pl.DataFrame:
    """The rows ``unanchored`` counts (reference 4.12): planning nodes (kind ``task``, or
    an ACTIVE() thread row) that are not superseded and have no live anchor."""
    return scoped.filter(
        ((pl.col("kind") == "task").fill_null(False) | pl.col("thread").is_not_null())
        & ~pl.col("superseded")
        & ~_anchored(graph)
    )


def mission_sections(
    scoped: pl.DataFrame,
    graph: MissionGraph,
    scopes: Sequence[str],
    n: int,
    now: _dt.datetime,
    attach: Attach | None = None,
) -> dict[str, dict | None]:
    """``mission`` for every scope: the global cycle, or the fenced roots, or None.

    Roots are live ``epic`` capsules of the scope with no live-parent anchoring
    ``grounded_in`` edge, newest first, capped at ``n``; each carries ``children``,
    the store-wide count of live children. None (omit the key) when acyclic with no
    root in the scope.
    """
    if graph.cycle is not None:
        return {scope: dict(graph.cycle) for scope in scopes}
    roots = (
        root_candidates(scoped, graph)
        .pipe(top_per_scope, n)
        .join(graph.children, on="id", how="left")
        .with_columns(pl.col("children").fill_null(0))
    )
    roots = with_content(roots, attach) if roots.height else roots
    lists = {
        scope: headline_rows(part, now, extra=(("children", pl.col("children").cast(pl.Int64)),))
        for scope, part in per_scope(roots).items()
    }
    return {
        scope: ({"status": "ok", "roots": lists[scope]} if lists.get(scope) else None)
        for scope in scopes
    }


def unanchored_sections(
    scoped: pl.DataFrame,
    graph: MissionGraph,
    scopes: Sequence[str],
) -> dict[str, int | None]:
    """``unanchored`` for every scope: live planning nodes with no live anchor, or None.

    A planning node is a capsule classified ``task`` or one whose content opens with an
    ACTIVE() thread label (whatever its kind). None (omit the key) at 0.
    """
    counts = (
        unanchored_candidates(scoped, graph)
        .group_by(SCOPE)
        .len()
    )
    found = dict(zip(counts[SCOPE].to_list(), counts["len"].to_list(), strict=True))
    return {scope: (found.get(scope) or None) for scope in scopes}
