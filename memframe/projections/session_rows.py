"""Where the session rows live: partial rows in sorted runs, combined when read.

The session fold is a group-by over partial rows whose every term is exact and
order-independent (`memframe.projections.session.combine_partials`), so the projection
keeps partials, not finished rows: a cycle combines the partials of the rows written since
the watermark (one per conversation touched) and appends them as a run of
``projections/session/partials/T<k>`` (`memframe.derived.runs`), reading no stored row;
the runs merge, combining a conversation's partials, a budgeted amount per cycle; a reader
combines the partials of the conversations it names (found by key in each run's row groups)
and hashes the rows. So a cycle reads what was written, whatever the projection's size and
however the conversation ids are spread.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from memframe.derived.runs import Budget, SortedRuns
from memframe.projections.session import (
    PARTIAL_SCHEMA,
    SESSION_SCHEMA,
    combine_partials,
    fold_sessions,
    row_partials,
    session_row_model,
    with_hash,
)

if TYPE_CHECKING:
    from memframe.store import StoreView
    from memframe.store.capture import Commit

__all__ = ["PARTIALS", "KEY", "WATERMARK", "watermark_of", "read_all", "read_keys",
           "stage_append", "stage_replace"]

KEY = "conversation_id"
#: the watermark key of the session projection in the generation log
WATERMARK = "projections/session"


def watermark_of(view: StoreView) -> int:
    """The highest canonical ``seq`` folded into the session projection at ``view`` (for
    a generation whose derived files were vacuumed, the one it recorded)."""
    recorded = getattr(view, "vacuumed_marks", {}).get(WATERMARK)
    return int(view.watermarks.get(WATERMARK, recorded) or 0)


def _rows_read(view: StoreView) -> int:
    return int(view.row_count("capsules")) + int(view.row_count("summaries"))


def _refolded(view: StoreView) -> pl.DataFrame | None:
    """The session rows of a generation whose derived files a vacuum removed, folded
    from its canonical rows up to the watermark it recorded (None: the rows are stored)."""
    if WATERMARK not in getattr(view, "vacuumed_marks", {}):
        return None
    mark = watermark_of(view)
    caps = view.table("capsules").filter(pl.col("seq") <= mark).select(
        "id", "created_at", "content_chars", "conversation_id")
    sums = view.table("summaries").filter(pl.col("seq") <= mark).select(
        "seq", "conversation_id", "summary")
    return fold_sessions(caps, sums)


def _combine(rows: pl.DataFrame) -> pl.DataFrame:
    return combine_partials(rows.lazy()).collect(engine="in-memory")


#: the partial rows, one run per cycle, merged by conversation
PARTIALS = SortedRuns("projections/session/partials", PARTIAL_SCHEMA, (KEY,),
                      combine=_combine)


def _rows(partials: pl.DataFrame) -> pl.DataFrame:
    """Partials of several runs -> finished session rows (one per conversation, hashed)."""
    if not partials.height:
        return pl.DataFrame(schema=SESSION_SCHEMA)
    return with_hash(_combine(partials))


def read_keys(view: StoreView, ids: Sequence[str]) -> tuple[pl.DataFrame, int]:
    """The session rows of ``ids`` (absent ids have none) and the Parquet rows read.

    Examples:
        >>> import memframe as mf, tempfile, os
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> _ = store.ingest([{"content": f"note {i}", "source": "s", "anchor": "a",
        ...                    "conversation_id": c} for i, c in enumerate(("c1", "c2", "c1"))])
        >>> _ = store.memory.run_cycle()
        >>> rows, _visited = read_keys(store.pinned(), ["c1"])
        >>> rows.select("conversation_id", "memory_count").rows()
        [('c1', 2)]
    """
    refolded = _refolded(view)
    if refolded is not None:
        return refolded.filter(pl.col(KEY).is_in(list(ids))), _rows_read(view)
    partials, visited = PARTIALS.lookup(view, list(ids))
    return _rows(partials), visited


def read_all(view: StoreView) -> tuple[pl.DataFrame, int]:
    """Every session row (sorted by conversation) and the Parquet rows read."""
    refolded = _refolded(view)
    if refolded is not None:
        return refolded, _rows_read(view)
    partials, visited = PARTIALS.read_all(view)
    return _rows(partials).sort(KEY), visited


#: the session row's rules over combined partials, in one pass (`_validated`)
_RULES = (pl.col(KEY).is_not_null().all() & pl.col(KEY).is_unique().all()
          & (pl.col("memory_count") >= 0).all() & (pl.col("content_chars") >= 0).all())


def _validated(partials: pl.DataFrame) -> pl.DataFrame:
    """Partials checked as session rows (a combined partial is a row without its hash).

    One Polars pass checks the model's rules, as the canonical tables' writes do; the
    pandera model runs only when that pass fails, to name the column and the row (it cost
    about a tenth of a steady cycle when it ran on every cycle).
    """
    if not _passes(partials):
        session_row_model().validate(with_hash(partials), lazy=False)
    return partials


def _passes(partials: pl.DataFrame) -> bool:
    if dict(partials.schema) != dict(PARTIAL_SCHEMA):
        return False
    return bool(partials.select(_RULES.fill_null(False)).item())


def stage_append(commit: Commit, view: StoreView, partials: pl.DataFrame,
                 budget: Budget | None = None) -> int:
    """Stage the combined ``partials`` of a cycle (one per conversation) as a run and
    advance the merges within ``budget``. Returns the Parquet rows read.
    """
    _validated(partials)
    return PARTIALS.stage_append(commit, view, partials, budget)


def stage_replace(commit: Commit, view: StoreView, rows: pl.DataFrame) -> None:
    """Stage finished session ``rows`` as the whole projection (one run; the others
    dropped)."""
    session_row_model().validate(rows, lazy=False)
    PARTIALS.stage_replace(commit, view, row_partials(rows.lazy()).collect(engine="in-memory"))
