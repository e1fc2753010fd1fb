"""Generic storage for derived tables: sorted runs and keyed runs.

Derived tables live under ``projections/`` in a store and are rebuildable from the
canonical tables alone. This package knows how rows are laid out (sorted runs merged on a
budget, `memframe.derived.runs`; one current row per key, `memframe.derived.keyed`), never
what they mean: the projections (`memframe.projections`) and the digest's state
(`memframe.digest.state`) decide that. Reading goes through a pinned ``StoreView`` and
writing through a ``Commit``: no module here does I/O of its own.
"""

from typing import Any


def read_whole(view: Any, table: str, schema: Any) -> tuple[Any, int]:
    """Every row of the derived ``table`` (a ``pl.DataFrame`` in ``schema``) and the
    Parquet rows read."""
    return view.derived(table, schema).collect(engine="in-memory"), view.row_count(table)


def job_report(visited: int = 0, folded: int = 0, written: int = 0) -> dict[str, int]:
    """What one job of a cycle did, in rows: read, folded, written."""
    return {"rows_visited": visited, "rows_folded": folded, "rows_written": written}
