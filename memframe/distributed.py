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
* `digest_many` runs one digest per store as a Ray task (``engine="ray"``) or in local
  worker processes (``engine="processes"``); a failing store is reported in the
  :class:`~memframe.digest.batch.BatchReport`, never fatal.

Ray is optional (``pip install "memframe[ray]"``) and imported only inside these
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

import contextlib
import logging
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from memframe import schema as S
from memframe.digest.batch import BatchReport, _digest_one, _write, prepare_out_dir
from memframe.digest.batch import digest_many as _digest_many_processes
from memframe.errors import ClusterError, InvalidInputError, MemframeError, ReadOnlyStoreError
from memframe.projections import cycle as _cycle
from memframe.projections.cycle import CycleReport
from memframe.projections.session import SESSION_SCHEMA, fold_sessions
from memframe.store import Store, StoreView

if TYPE_CHECKING:
    import pyarrow as pa

    from memframe.store.capture import Commit

__all__ = ["rebuild_sessions", "digest_many", "fold_block", "merge_blocks", "BatchReport",
           "REBUILD_ENGINES", "DIGEST_ENGINES"]

#: engines of `rebuild_sessions`: Ray Data, or the local rebuild door
REBUILD_ENGINES: tuple[str, ...] = ("ray", "local")
#: engines of `digest_many`: Ray tasks, or local worker processes
DIGEST_ENGINES: tuple[str, ...] = ("ray", "processes")

#: the capsule columns the session fold reads (the summaries are read on the driver)
_BLOCK_COLUMNS = ["id", "created_at", "content_chars", "conversation_id"]
_SUMMARY_COLUMNS = ["seq", "conversation_id", "summary"]


# ---- Ray, optional and lazy ----------------------------------------------------------------

def _import_ray(*, data: bool = False) -> Any:
    """The ``ray`` module (with ``ray.data`` when asked), or a teaching error."""
    try:
        import ray

        if data:
            import ray.data  # noqa: F401
    except ImportError as exc:
        raise MemframeError(
            f'the Ray engine needs Ray, which is not installed ({exc}); install it with '
            f'pip install "memframe[ray]", or use the local engine'
        ) from None
    return ray


@contextlib.contextmanager
def _ray_running(ray: Any, address: str | None, num_cpus: int | None) -> Iterator[bool]:
    """Use the running Ray, else connect to ``address`` or start a local one; stop what
    was started here. Yields True when this call started (or connected) Ray."""
    if ray.is_initialized():
        yield False
        return
    try:
        if address is not None:
            ray.init(address=address)
        else:
            ray.init(num_cpus=num_cpus or os.cpu_count() or 1, include_dashboard=False)
    except Exception as exc:  # noqa: BLE001 - Ray raises many kinds; all mean "no cluster"
        where = f"the Ray cluster at {address!r}" if address is not None else "a local Ray"
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        raise ClusterError(
            f"could not start or reach {where} ({type(exc).__name__}: {first}); nothing was "
            f"digested. Check the address (ray status), or leave --engine ray out to use "
            f"local processes"
        ) from None
    try:
        yield True
    finally:
        ray.shutdown()


def _check_num_cpus(num_cpus: int | None) -> None:
    if num_cpus is not None and (isinstance(num_cpus, bool) or not isinstance(num_cpus, int)
                                 or num_cpus < 1):
        raise InvalidInputError(f"num_cpus must be a positive integer or None, got {num_cpus!r}")


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


def _fold_on_ray(ray: Any, files: list[str], progress: bool) -> list[pa.Table]:
    """Every block of ``files`` folded by `fold_block` on Ray Data; the partials."""
    if not files:
        return []
    context = ray.data.DataContext.get_current()
    saved = (context.enable_progress_bars, context.use_datasource_v2)
    logger = logging.getLogger("ray.data")
    level = logger.level
    context.enable_progress_bars = progress
    # The files are named by the pinned generation, so nothing needs listing. Measured on
    # 2 cores with Ray 2.60, its default (listing-based) reader took ~12 s over 31 small
    # files, the classic reader 0.6 s.
    context.use_datasource_v2 = False
    if not progress:
        logger.setLevel(logging.WARNING)
    try:
        ds = ray.data.read_parquet(files, partitioning=None, file_extensions=None)
        ds = ds.select_columns(_BLOCK_COLUMNS)
        ds = ds.map_batches(fold_block, batch_format="pyarrow", batch_size=None)
        return [t for t in ray.get(ds.to_arrow_refs()) if t.num_rows]
    finally:
        context.enable_progress_bars, context.use_datasource_v2 = saved
        logger.setLevel(level)


def _land(commit: Commit, rows: pl.DataFrame, mark: int, visited: int,
          folded_in: int, store: Store | None = None) -> CycleReport:
    """Stage the folded projection and its watermark, as the rebuild door stages them."""
    return _cycle.stage_rebuild(commit, rows, mark, rows_visited=visited, rows_folded=folded_in,
                                store=store)


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
        MemframeError: Ray is not installed (``pip install "memframe[ray]"``).
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
    _check_num_cpus(num_cpus)
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
    return store.commit(lambda c: _land(c, rows, mark, visited, folded_in, store),
                        operation="memory_rebuild_projections")


# ---- batch digests --------------------------------------------------------------------------

def _digest_or_error(path: str, kwargs: dict[str, Any]) -> tuple[bool, Any]:
    """One store's digest, or its error text (run as a Ray task)."""
    try:
        return True, _digest_one(path, kwargs)
    except Exception as exc:  # noqa: BLE001 - reported per store, never fatal
        return False, f"{type(exc).__name__}: {exc}"


def _digest_on_ray(ray: Any, paths: list[str], out: Path | None, progress: bool,
                   kwargs: dict[str, Any]) -> BatchReport:
    from tqdm.auto import tqdm

    report = BatchReport()
    task = ray.remote(num_cpus=1)(_digest_or_error)
    pending = {task.remote(os.path.abspath(path), kwargs): path for path in dict.fromkeys(paths)}
    bar = tqdm(total=len(pending), desc="digest", unit="store", file=sys.stderr,
               disable=not (progress and sys.stderr.isatty()))
    waiting = list(pending)
    while waiting:
        done, waiting = ray.wait(waiting, num_returns=1)
        for ref in done:
            path = pending[ref]
            try:
                ok, value = ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - a lost worker fails one store only
                ok, value = False, f"{type(exc).__name__}: {exc}"
            if ok:
                report.digests[path] = value
                if out is not None:
                    report.written[path] = _write(out, Path(path).name, value.to_json())
            else:
                report.failures[path] = value
            bar.update(1)
    bar.close()
    report.digests = {p: report.digests[p] for p in paths if p in report.digests}
    report.failures = {p: report.failures[p] for p in paths if p in report.failures}
    report.written = {p: report.written[p] for p in paths if p in report.written}
    return report


def digest_many(
    store_paths: Iterable[str | os.PathLike[str]],
    engine: str = "ray",
    *,
    address: str | None = None,
    num_cpus: int | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    progress: bool = True,
    **digest_kwargs: Any,
) -> BatchReport:
    """Digest many stores as Ray tasks (or in local worker processes).

    Each store is digested on its own (``memframe.digest(Store.open(path),
    **digest_kwargs)``), so every result is identical to a one-by-one digest. A store
    that fails (missing, not a store, damaged, a lost worker) is reported in
    ``failures`` with its error text and never stops the batch.

    Args:
        store_paths: the store directories. With a cluster, every host must see them at
            the same path (shared storage); relative paths are made absolute here.
        engine: ``"ray"`` (one Ray task per store) or ``"processes"`` (local worker
            processes, as :func:`memframe.digest.digest_many`).
        address: a Ray cluster address (only with ``engine="ray"``). Without it, a
            running Ray is used, else a local one is started for this call and shut down
            after it.
        num_cpus: CPUs of a local Ray started here, or worker processes with
            ``engine="processes"`` (default: all of this machine's).
        out_dir: when given, each digest's ``to_json()`` is written to
            ``<out_dir>/<store directory name>.json`` (directory names must be unique).
        progress: show a progress bar on stderr (only when stderr is a terminal).
        **digest_kwargs: passed to :func:`memframe.digest` (``headlines``,
            ``project_prefix``, ``now``, ``known_hash``).

    Returns:
        A :class:`~memframe.digest.batch.BatchReport`: ``digests`` and ``failures`` by
        store path (in input order) and ``written`` files.

    Raises:
        MemframeError: ``engine="ray"`` without Ray installed
            (``pip install "memframe[ray]"``).
        InvalidInputError: an unknown engine, ``address`` without Ray, or duplicate
            directory names with ``out_dir``.

    Examples:
        >>> import datetime as dt, os, tempfile
        >>> import memframe as mf
        >>> from memframe.distributed import digest_many
        >>> root = tempfile.mkdtemp()
        >>> for name in ("a", "b"):
        ...     _ = mf.Store.create(os.path.join(root, name))
        >>> paths = [os.path.join(root, n) for n in ("a", "b", "missing")]
        >>> now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
        >>> report = digest_many(paths, engine="processes", progress=False, now=now)
        >>> len(report.digests), len(report.failures)
        (2, 1)
        >>> report = digest_many(paths, engine="ray", progress=False, now=now)  # doctest: +SKIP
        >>> len(report.digests), len(report.failures)  # doctest: +SKIP
        (2, 1)
    """
    if engine not in DIGEST_ENGINES:
        raise InvalidInputError(
            f"unknown engine {engine!r}; digest_many runs on one of: {', '.join(DIGEST_ENGINES)}"
        )
    _check_num_cpus(num_cpus)
    if engine == "processes":
        if address is not None:
            raise InvalidInputError("address names a Ray cluster; pass engine='ray' with it")
        return _digest_many_processes(store_paths, out_dir=out_dir, processes=num_cpus,
                                      progress=progress, **digest_kwargs)
    paths = [str(Path(p)) for p in store_paths]
    out = prepare_out_dir(paths, out_dir)
    if not paths:
        return BatchReport()
    ray = _import_ray()
    with _ray_running(ray, address, num_cpus):
        return _digest_on_ray(ray, paths, out, progress, digest_kwargs)
