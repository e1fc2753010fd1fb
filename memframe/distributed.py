"""Past one machine: the session fold per block on Ray Data, batch digests as Ray tasks.

memframe's folds are mergeable partials (DESIGN.md sections 4 and 7), so nothing here is
a new engine: the SAME Polars code runs per block on Ray Data, an existing distributed
engine, and the blocks' results are merged with the same fold the incremental cycle
uses.

* `rebuild_sessions` pins one generation, folds each block of its capsule partition
  files with :func:`memframe.projections.session.fold_sessions` on Ray Data, gathers the
  per-block session rows, merges them (with the summaries) through ``fold_sessions``
  again -- exactly as the cycle folds new rows into stored ones -- and lands the
  projection with its watermark through the store's normal commit. Its rows and hashes
  are identical to ``store.memory.rebuild_projections()`` at the same generation.
* `digest_many` is `memframe.digest_many`, the one batch digest: one digest per
  store as a Ray task (``engine="ray"``) or in local worker processes (``engine=
  "processes"``); a failing store is reported in the
  :class:`~memframe.digest.batch.BatchReport`, never fatal.

Ray is optional (``pip install "ray[data]>=2.30"``, or ``pip install -e ".[ray]"`` from a checkout) and imported only inside these
functions; importing this module never starts it. When no Ray is running and no
``address`` is given, a local Ray is started for the call and shut down after it; a Ray
that is already running (``ray.init(...)`` by the caller) is used and left running.

Examples:
    >>> import memframe as mf, tempfile, os
    >>> from memframe import distributed
    >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
    >>> _ = store.ingest([{"content": t, "source": "s", "anchor": t,
    ...                    "conversation_id": "conv-1"} for t in "ab"])
    >>> distributed.rebuild_sessions(store, engine="local").projections["session"]["rows_written"]
    1
    >>> distributed.rebuild_sessions(store, engine="ray").rows_written  # doctest: +SKIP
    1
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import polars as pl

from memframe import schema as S
from memframe.digest.batch import DIGEST_ENGINES, BatchReport, digest_many
from memframe.digest.engines import check_workers, task_options
from memframe.digest.engines import import_ray as _import_ray
from memframe.digest.engines import ray_running as _ray_running
from memframe.errors import InvalidInputError, ReadOnlyStoreError
from memframe.jobs import cycle as _cycle
from memframe.jobs.cycle import CycleReport
from memframe.projections.session import SESSION_SCHEMA, fold_sessions
from memframe.store import Store, StoreView

if TYPE_CHECKING:
    import pyarrow as pa

    from memframe.store.capture import Commit

__all__ = ["rebuild_sessions", "digest_many", "fold_block", "fold_files", "merge_blocks",
           "BatchReport",
           "REBUILD_ENGINES", "DIGEST_ENGINES"]

#: engines of `rebuild_sessions`: Ray Data, or the local rebuild door
REBUILD_ENGINES: tuple[str, ...] = ("ray", "local")

#: the capsule columns the session fold reads (the summaries are read on the driver)
_BLOCK_COLUMNS = ["id", "created_at", "content_chars", "conversation_id"]
_SUMMARY_COLUMNS = ["seq", "conversation_id", "summary"]


# ---- the session fold, per block -----------------------------------------------------------

def _empty_capsules() -> pl.LazyFrame:
    schema = S.table_schema("capsules")
    return pl.LazyFrame(schema={c: schema[c] for c in _BLOCK_COLUMNS})


def _empty_summaries() -> pl.LazyFrame:
    schema = S.table_schema("summaries")
    return pl.LazyFrame(schema={c: schema[c] for c in _SUMMARY_COLUMNS})


def fold_block(block: pa.Table) -> pa.Table:
    """Fold one block of capsule rows into session rows (run per block on Ray Data).

    It is the local fold, :func:`~memframe.projections.session.fold_sessions`, applied
    to the block: each conversation in the block becomes one session row, which is a
    partial row for `merge_blocks`.

    Args:
        block: capsule rows as an Arrow table with at least ``id``, ``created_at``,
            ``content_chars`` and ``conversation_id``.

    Returns:
        The block's session rows as an Arrow table (``SESSION_SCHEMA`` columns).

    Examples:
        >>> import pyarrow as pa, datetime as dt
        >>> t = dt.datetime(2026, 7, 23, tzinfo=dt.timezone.utc)
        >>> block = pa.table({"id": ["cap-1", "cap-2"], "created_at": [t, t],
        ...                   "content_chars": [3, 4], "conversation_id": ["c", None]})
        >>> fold_block(block).column("memory_count").to_pylist()
        [1]
    """
    schema = S.table_schema("capsules")
    caps = pl.from_arrow(block)
    assert isinstance(caps, pl.DataFrame)
    caps = caps.select(pl.col(c).cast(schema[c]) for c in _BLOCK_COLUMNS)
    rows = fold_sessions(caps.lazy(), _empty_summaries(), engine="in-memory")
    return rows.to_arrow()


def merge_blocks(blocks: Iterable[pl.DataFrame | pa.Table],
                 summaries: pl.LazyFrame | pl.DataFrame | None = None) -> pl.DataFrame:
    """Merge per-block session rows (and the canonical summaries) into the final rows.

    This is the cycle's merge: ``fold_sessions`` with the block rows as the existing
    partials. Every term is exact and order-independent, so the result equals one fold
    over all the rows, to the hash, however the rows were cut into blocks.

    Args:
        blocks: the outputs of `fold_block` (Arrow tables or Polars frames).
        summaries: canonical ``summaries`` rows (``seq``, ``conversation_id``,
            ``summary``), or None.

    Returns:
        Session rows of ``SESSION_SCHEMA`` with their hashes, sorted by conversation_id.

    Examples:
        >>> import pyarrow as pa, datetime as dt
        >>> t = dt.datetime(2026, 7, 23, tzinfo=dt.timezone.utc)
        >>> caps = pa.table({"id": ["cap-1", "cap-2", "cap-3"], "created_at": [t, t, t],
        ...                  "content_chars": [3, 4, 5], "conversation_id": ["c", "c", "d"]})
        >>> rows = merge_blocks([fold_block(caps.slice(0, 1)), fold_block(caps.slice(1))])
        >>> rows.select("conversation_id", "memory_count", "content_chars").rows()
        [('c', 2, 7), ('d', 1, 5)]
    """
    frames: list[pl.DataFrame] = []
    for block in blocks:
        frame = block if isinstance(block, pl.DataFrame) else pl.from_arrow(block)
        assert isinstance(frame, pl.DataFrame)
        frames.append(frame.select(pl.col(c).cast(t) for c, t in SESSION_SCHEMA.items()))
    existing = (pl.concat(frames, how="vertical") if frames
                else pl.DataFrame(schema=SESSION_SCHEMA))
    sums = _empty_summaries() if summaries is None else summaries.lazy()
    return fold_sessions(_empty_capsules(), sums, existing.lazy(), engine="in-memory")


def fold_files(batch: pa.Table) -> pa.Table:
    """Read the capsule partition files a batch names (column ``path``) and fold each
    with `fold_block`; their session rows, concatenated (partials for `merge_blocks`).

    Examples:
        >>> import pyarrow as pa, pyarrow.parquet as pq, datetime as dt, os, tempfile
        >>> t = dt.datetime(2026, 7, 23, tzinfo=dt.timezone.utc)
        >>> path = os.path.join(tempfile.mkdtemp(), "part.parquet")
        >>> pq.write_table(pa.table({"id": ["cap-1"], "created_at": [t], "content_chars": [3],
        ...                          "conversation_id": ["c"], "content": ["x"]}), path)
        >>> fold_files(pa.table({"path": [path]})).column("memory_count").to_pylist()
        [1]
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [fold_block(pq.read_table(path, columns=_BLOCK_COLUMNS))
            for path in batch.column("path").to_pylist()]
    return pa.concat_tables(rows) if rows else pl.DataFrame(schema=SESSION_SCHEMA).to_arrow()


#: the most blocks the partition files are cut into (one file a block below it)
_MAX_BLOCKS = 256


def _fold_on_ray(ray: Any, files: list[str], progress: bool) -> list[pa.Table]:
    """Every partition file of ``files`` folded by `fold_files` on Ray Data; the partials.

    The pinned generation names the files, so nothing is listed: the dataset is the list
    of paths, cut into blocks, and each block's files are read and folded by one task
    that reserves one CPU and runs Polars on one thread (its ``runtime_env``). The
    dataset's own copy of the Ray Data context carries the progress and logging choices,
    so no process-wide Ray Data setting changes.
    """
    if not files:
        return []
    ds = ray.data.from_items([{"path": f} for f in files],
                             override_num_blocks=min(len(files), _MAX_BLOCKS))
    ds = ds.map_batches(fold_files, batch_format="pyarrow", batch_size=None,
                        **task_options(1))
    context = ds.context  # this dataset's copy, never DataContext.get_current()
    context.enable_progress_bars = progress
    context.print_on_execution_start = progress
    context.enable_auto_log_stats = False
    return [t for t in ray.get(ds.to_arrow_refs()) if t.num_rows]


def _land(commit: Commit, rows: pl.DataFrame, mark: int, visited: int,
          folded_in: int) -> CycleReport:
    """Stage the folded projection and its watermark, as the rebuild door stages them."""
    return _cycle.stage_rebuild(commit, rows, mark, rows_visited=visited, rows_folded=folded_in)


def rebuild_sessions(
    store: Store | str | os.PathLike[str],
    engine: str = "ray",
    *,
    address: str | None = None,
    num_cpus: int | None = None,
    progress: bool = False,
) -> CycleReport:
    """The rebuild door of the session projection, with the fold spread over Ray Data.

    One generation is pinned. Each block of its capsule partition files is folded with
    the local session fold on Ray Data; the per-block rows are gathered and merged with
    the canonical summaries through the same fold the cycle uses; the projection and its
    watermark (the highest seq of the pinned generation's capsules and summaries) land
    in one commit, exactly as ``store.memory.rebuild_projections()`` lands them. Rows and
    hashes are identical to the local rebuild at that generation. Rows committed by
    others while the fold runs are above the watermark, so the next cycle folds them in.

    Args:
        store: a writable `Store`, or the path of one.
        engine: ``"ray"`` (Ray Data) or ``"local"`` (the local rebuild door).
        address: a Ray cluster address (``"auto"``, ``"ray://host:10001"``, ...). Without
            it, a running Ray is used, else a local one is started for this call.
        num_cpus: CPUs of a local Ray started here (default: all of this machine's).
        progress: show Ray Data's progress bars.

    Returns:
        The rebuild's `CycleReport` (rows visited, folded, written, watermark, generation).

    Raises:
        MemframeError: Ray is not installed (``pip install "ray[data]>=2.30"``, or ``pip install -e ".[ray]"`` from a checkout).
        ReadOnlyStoreError: ``store`` is a frozen view.
        InvalidInputError: an unknown engine.

    Examples:
        >>> import memframe as mf, tempfile, os
        >>> from memframe.distributed import rebuild_sessions
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> for t in "abc":
        ...     _ = store.ingest({"content": t, "source": "s", "anchor": t,
        ...                       "conversation_id": "conv-1"})
        >>> report = rebuild_sessions(store, engine="ray")  # doctest: +SKIP
        >>> report.rows_folded, report.rows_written  # doctest: +SKIP
        (3, 1)
    """
    if engine not in REBUILD_ENGINES:
        raise InvalidInputError(
            f"unknown engine {engine!r}; rebuild_sessions runs on one of: "
            f"{', '.join(REBUILD_ENGINES)}"
        )
    check_workers(num_cpus)
    if isinstance(store, (str, os.PathLike)):
        store = Store.open(store)
    if not isinstance(store, Store):
        generation = getattr(store, "generation", "?")
        raise ReadOnlyStoreError(
            f"this is a frozen view of generation {generation}; rebuild through "
            f"mf.Store.open({str(getattr(store, 'path', ''))!r})"
        )
    if engine == "local":
        return store.memory.rebuild_projections()
    ray = _import_ray(data=True)
    view: StoreView = store.pinned()
    cap_parts = list(view.partitions("capsules"))
    sum_parts = list(view.partitions("summaries"))
    files = [str(path) for path in view.files("capsules")]
    summaries = view.table("summaries").select(_SUMMARY_COLUMNS).collect()
    with _ray_running(ray, address, num_cpus):
        blocks = _fold_on_ray(ray, files, progress)
    rows = merge_blocks(blocks, summaries)
    visited = sum(p.rows for p in cap_parts) + sum(p.rows for p in sum_parts)
    folded_in = int(rows["memory_count"].sum() or 0) + summaries.height
    mark = max((p.seq_hi or 0 for p in [*cap_parts, *sum_parts]), default=0)
    return store.commit(lambda c: _land(c, rows, mark, visited, folded_in),
                        operation="memory_rebuild_projections")
