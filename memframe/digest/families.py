"""The digest's store-wide sections, by family of source tables: each family's values
depend on its own tables only, which lets the digest job keep them
(`memframe.digest.state.kept_families`).

Families (table -> what the digest reads from it):

* ``graph`` (``relations``, ``forgets``): ``relations``, the uncapped blocks-DAG projection
  (`memframe.graph.blocks_projection`), the mission graph's anchoring, child counts and
  cycle (`memframe.graph.mission_graph`), and what the ``open_efforts`` board reads of the
  relations (`memframe.digest.efforts.EffortGraph`);
* ``sources`` (``source_cursors``, ``corroborations``): the ``sources`` section;
* ``misses`` (``recall_misses``): ``recall_misses`` and ``recent_failures``;
* ``lanes`` (``lane_overrides``): ``lane_overrides_total``;
* ``sessions`` (``brackets``): ``open_sessions`` and every open session id, oldest-open
  first (a digest takes the first N).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

__all__ = ["FAMILIES", "family_values", "graph_values"]

#: family -> the canonical tables its values are computed from
FAMILIES: dict[str, tuple[str, ...]] = {
    "graph": ("relations", "forgets"),
    "sources": ("source_cursors", "corroborations"),
    "misses": ("recall_misses",),
    "lanes": ("lane_overrides",),
    "sessions": ("brackets",),
}


def _guarded(build: Any) -> Any:
    # a fail-open section whose builder raises is omitted (None), as in the full digest
    try:
        return build()
    except Exception:  # noqa: BLE001
        return None


def family_values(family: str, tables: Mapping[str, pl.DataFrame | None]) -> dict[str, Any]:
    """THE computation of a family's values from its tables (a table is None when its read
    failed: the fail-open sections built on it are None).

    Examples:
        >>> import polars as pl
        >>> rel = pl.DataFrame({"kind": ["blocks"], "from_id": ["cap-1"], "to_id": ["cap-2"]})
        >>> forgets = pl.DataFrame({"capsule_id": []}, schema={"capsule_id": pl.String})
        >>> v = family_values("graph", {"relations": rel, "forgets": forgets})
        >>> v["relations"], v["dag_projection"]["ready"]
        (1, ['cap-1'])
    """
    from memframe.digest import telemetry

    if family == "graph":
        relations, forgets = tables["relations"], tables["forgets"]
        assert relations is not None and forgets is not None  # fail-closed tables
        return graph_values(relations, forgets.get_column("capsule_id").unique().sort())
    if family == "sources":
        return {"sources": _guarded(lambda: telemetry.sources_section(
            tables["source_cursors"], tables["corroborations"]))}
    if family == "misses":
        misses = tables["recall_misses"]
        return {"recall_misses": _guarded(lambda: telemetry.recall_misses_total(misses)) or 0,
                "_recent_failures": _guarded(lambda: telemetry.recent_failures(misses, False))}
    if family == "lanes":
        return {"lane_overrides_total": _guarded(
            lambda: telemetry.lane_overrides_total(tables["lane_overrides"]))}
    if family == "sessions":  # every open id, oldest-open first: a digest takes its first N
        from memframe.digest.counters import open_sessions

        brackets = tables["brackets"]
        assert brackets is not None  # a fail-closed table
        count, ids = open_sessions(brackets, brackets.height)
        return {"open_sessions": count, "open_session_ids": ids}
    raise ValueError(f"unknown family {family!r}; the families are {', '.join(FAMILIES)}")


def graph_values(relations: pl.DataFrame, tombstoned: pl.Series) -> dict[str, Any]:
    """The ``graph`` family's values from every relation row and the tombstoned ids."""
    from memframe.digest.efforts import effort_graph
    from memframe.graph import blocks_projection, mission_graph

    return {
        "relations": relations.height,
        "dag_projection": blocks_projection(relations, tombstoned),
        "mission_graph": mission_graph(relations, tombstoned),
        "effort_graph": effort_graph(relations),
    }
