"""Partition files: writing them, and reading a table at a generation as Polars frames.

Readers go through the file list of the pinned generation, never a directory glob, so a
crashed writer's files are never read.
"""

from __future__ import annotations

import bisect
import functools
import importlib
import os
import secrets
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from memframe._scalars import as_int
from memframe.errors import CorruptStoreError, DamagedDerivedError, GenerationNotFoundError
from memframe.store.footer import Footer, read_footer
from memframe.store.log import Part, check_no_link, parse_json
from memframe.store.spill import SpilledRows

if TYPE_CHECKING:
    from polars._typing import PolarsDataType

# Free text never goes into row-group statistics: a min/max in a file footer would
# outlive the erasure of the row it came from.
_NO_STATISTICS = {"content", "summary", "reason", "detail", "term"}
# Columns whose values are (nearly) all distinct: a dictionary page would only be built to
# be thrown away, so they are written plain.
_NO_DICTIONARY = {"id", "content", "source_hash", "chained_hash", "subject"}
ROW_GROUP_ROWS = 64 * 1024
#: partitions of fewer bytes (in memory), or in row groups of fewer rows than
#: ``COMPRESS_FROM_GROUP``, are written uncompressed: zstd over a few values a column chunk
#: costs more time than it saves bytes (a one-row capsule part: 0.44 ms and 4.8 KB
#: compressed, 0.18 ms and 4.6 KB not; the digest leaders' 16-row groups of short text:
#: 12.5 ms and 86 KB, 4.5 ms and 82 KB). Past that it pays: 40 capsules of 2 KB text are
#: half the size compressed, and a 10M-row run in 64-row groups is 230 MB, 380 MB not.
COMPRESS_FROM_BYTES = 16 * 1024
COMPRESS_FROM_GROUP = 32
#: rows converted to Arrow at a time when a partition is written (whole row groups)
WRITE_ROWS = 256 * 1024


class _Deferred:
    """A module imported on first use. pyarrow (and numpy, which it loads) costs a short
    process, such as a session-start hook's digest, about a third of what Polars does;
    only writes and reads by row group need it."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)


pa: Any = _Deferred("pyarrow")
pq: Any = _Deferred("pyarrow.parquet")
PART_ROWS = 256 * 1024  # rows per partition file a commit writes (larger commits split)
#: rows per partition of a table whose rows an erasure rewrites (``capsules``: its content).
#: A purge or a redaction writes the partition holding the capsule again, whole: at 256k
#: rows that is ~100 ms of encoding, most of an erasure, and the other writers wait for
#: the CPU meanwhile; at 16k it is ~8 ms, for a few hundred files more at 10M capsules.
ERASABLE_PART_ROWS = 16 * 1024
#: the tables an erasure rewrites (`ERASABLE_PART_ROWS`)
ERASABLE = frozenset({"capsules"})


def part_rows(table: str) -> int:
    """The most rows a partition of canonical ``table`` holds when a commit writes it
    (landing, an erasure and a compaction split or pack to it).

    Examples:
        >>> part_rows("capsules") <= part_rows("recalls")
        True
    """
    return min(PART_ROWS, ERASABLE_PART_ROWS) if table in ERASABLE else PART_ROWS


def partition_slices(table: str, frame: pl.DataFrame) -> Iterator[pl.DataFrame]:
    """``frame`` cut into the partitions a commit writes for ``table`` (`part_rows` rows
    each, the last one shorter; none for no rows).

    Examples:
        >>> import polars as pl
        >>> [f.height for f in partition_slices("recalls", pl.DataFrame({"x": [1, 2]}))]
        [2]
    """
    size = part_rows(table)
    for offset in range(0, frame.height, size):
        yield frame.slice(offset, size)


def part_path(table: str, generation: int, n: int) -> str:
    """A fresh, unique relative path for a new partition of ``table``."""
    return f"{table}/part-{generation:020d}-{n:04d}-{secrets.token_hex(6)}.parquet"


def write_part(
    root: Path,
    relpath: str,
    frame: pl.DataFrame | SpilledRows,
    *,
    row_group_rows: int | tuple[int, ...] = ROW_GROUP_ROWS,
    fsync: bool = True,
) -> Part:
    """Write ``frame`` (or rows spilled to disk, `memframe.store.spill`) as one immutable
    Parquet file; return its log entry. ``row_group_rows``: rows per row group, or the
    sizes of the first row groups in order, the last repeated for the rest (a reader that
    reads the first groups until it has enough reads small ones first)."""
    path = root / relpath
    check_no_link(root, path.parent)  # a table directory planted as a link is refused
    path.parent.mkdir(parents=True, exist_ok=True)
    sizes = [max(1, n) for n in (row_group_rows if isinstance(row_group_rows, tuple)
                                 else (row_group_rows,))] or [ROW_GROUP_ROWS]
    rows = sizes[-1]
    # a large frame is handed to the writer a slice of whole row groups at a time: its
    # Arrow copy (text re-encoded) is never held whole, and the file is the same
    step = rows * max(1, WRITE_ROWS // rows)
    pieces: list[tuple[int, int, int]] = []  # (first row, rows, rows per group)
    offset = 0
    for size in sizes[:-1]:
        if offset >= frame.height:
            break
        pieces.append((offset, size, size))
        offset += size
    pieces += [(o, step, rows) for o in range(offset, max(frame.height, 1), step)]
    first, length, group = pieces[0]
    table = frame.slice(first, length).to_arrow()
    stats = [name for name in table.column_names if name not in _NO_STATISTICS]
    with open(path, "xb") as fh:
        with pq.ParquetWriter(
            fh,
            table.schema,
            write_statistics=stats,
            use_dictionary=[n for n in table.column_names if n not in _NO_DICTIONARY],
            compression=codec(int(frame.estimated_size()) if isinstance(frame, pl.DataFrame)
                              else COMPRESS_FROM_BYTES, min(sizes)),
        ) as writer:
            writer.write_table(table, row_group_size=group)
            for first, length, group in pieces[1:]:
                writer.write_table(frame.slice(first, length).to_arrow(), row_group_size=group)
        if fsync:
            fh.flush()
            os.fsync(fh.fileno())
    seq_lo = seq_hi = None
    if "seq" in frame.columns and frame.height:
        seq_lo, seq_hi = as_int(frame["seq"].min()), as_int(frame["seq"].max())
    return Part(path=relpath, rows=frame.height, seq_lo=seq_lo, seq_hi=seq_hi)


def codec(nbytes: int, row_group_rows: int) -> str:
    """The compression of a partition of ``nbytes`` bytes in memory (`DataFrame.estimated_size`)
    in row groups of ``row_group_rows``.

    Examples:
        >>> codec(300, ROW_GROUP_ROWS), codec(1 << 20, 16), codec(1 << 20, 64)
        ('none', 'none', 'zstd')
    """
    small = nbytes < COMPRESS_FROM_BYTES or row_group_rows < COMPRESS_FROM_GROUP
    return "none" if small else "zstd"


def _paths(root: Path, parts: Sequence[Part]) -> list[str]:
    return [str(root / p.path) for p in parts]


def _missing_message(root: Path, path: str) -> str:
    """Why a partition file is absent: replaced by a later generation and vacuumed (time
    travel's limit), or missing (deleted outside memframe, an incomplete copy)."""
    replaced_at = None
    for entry in sorted((root / "_log").glob("[0-9]*.json")):
        try:
            if path in parse_json(entry.read_bytes()).get("remove", ()):
                replaced_at = int(entry.stem)
                break
        except (OSError, ValueError, AttributeError, TypeError):
            continue
    if replaced_at is not None:
        return (f"this generation is no longer readable: its partition {path} was replaced "
                f"at generation {replaced_at} and then vacuumed from {root}; generations "
                f"{replaced_at} and later may be read (`memframe info {root}` lists the "
                f"readable generations)")
    return (f"partition {path} is missing from {root}: no generation replaced it, so it was "
            f"deleted outside memframe or the store was copied incompletely; restore the file "
            f"or read a generation that does not name it")


def part_problem(path: Path) -> str | None:
    """Why a partition file cannot be read as Parquet (missing, too short, torn), or None.
    Reads its size and its first and last four bytes (Parquet's magic ``PAR1``)."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            if size < 12:
                return f"it holds {size} bytes, fewer than any Parquet file"
            head = fh.read(4)
            fh.seek(-4, os.SEEK_END)
            tail = fh.read(4)
    except FileNotFoundError:
        return "it is missing"
    except OSError as exc:
        return f"it cannot be read ({exc.strerror})"
    if head != b"PAR1" or tail != b"PAR1":
        return "it is not a whole Parquet file (truncated or overwritten: its magic bytes "\
               "are missing)"
    return None


def damaged_error(root: Path, path: str, why: str) -> CorruptStoreError:
    """The teaching error for a partition file that cannot be read: a derived one names
    the command that writes it again, a canonical one the copy to restore it from."""
    table = path.rsplit("/", 1)[0]
    if table.startswith(("projections/", "derived/")):
        return DamagedDerivedError(
            f"{root / path} cannot be read: {why}. It is derived (a projection or the "
            f"digest's kept state), so nothing is lost: `memframe rebuild {root}` "
            f"(store.memory.rebuild_projections()) writes it again from the canonical "
            f"tables; `memframe cycle` and `memframe digest` do so by themselves")
    if why == "it is missing":
        return CorruptStoreError(_missing_message(root, path))
    return CorruptStoreError(
        f"{root / path} cannot be read: {why}. It holds canonical rows of table {table} "
        f"(no other file has them): restore that file from a copy of the store (a backup "
        f"or a replica made with store.push), then run the command again; nothing was written")


def diagnose(root: Path, tables: Any) -> CorruptStoreError | None:
    """The first partition of ``tables`` ({table: parts}, a pinned generation's) that
    cannot be read, as its teaching error; None when every file is whole. Canonical
    files are checked first (their damage is the one that needs a person)."""
    names = sorted(tables, key=lambda t: (t.startswith(("projections/", "derived/")), t))
    for table in names:
        for part in tables[table]:
            why = part_problem(root / part.path)
            if why is not None:
                return damaged_error(root, part.path, why)
    return None


def require_present(root: Path, parts: Iterable[Part]) -> None:
    """Raise `GenerationNotFoundError` (why the file is gone, which generations remain)
    for the first of ``parts`` absent from ``root``."""
    for part in parts:
        if not (root / part.path).exists():
            raise GenerationNotFoundError(_missing_message(root, part.path))


def scan(root: Path, parts: Sequence[Part], schema: pl.Schema) -> pl.LazyFrame:
    """A LazyFrame over exactly ``parts`` (an empty frame of ``schema`` if none)."""
    if not parts:
        return pl.LazyFrame(schema=schema)
    require_present(root, parts)
    # the paths are exact names, never patterns: a store under "runs[1]" or "a*b" is read
    return pl.scan_parquet(_paths(root, parts), schema=schema, glob=False)


def read(root: Path, parts: Sequence[Part], schema: pl.Schema, columns: Iterable[str] | None = None) -> pl.DataFrame:
    frame = scan(root, parts, schema)
    if columns is not None:
        frame = frame.select(list(columns))
    try:
        return frame.collect()
    except (pl.exceptions.ComputeError, OSError) as exc:
        raise CorruptStoreError(f"cannot read a partition under {root}: {exc}") from None


def read_matching(
    root: Path,
    parts: Sequence[Part],
    schema: pl.Schema,
    column: str,
    values: Iterable[str],
    columns: Sequence[str] | None = None,
) -> tuple[pl.DataFrame, int]:
    """Rows whose ``column`` is in ``values``, reading only row groups that can hold them.

    Row groups are pruned with their min/max statistics. Returns the rows and the number
    of Parquet rows actually read (``rows_visited``).
    """
    wanted = sorted(set(values))
    want_cols = list(columns) if columns is not None else list(schema)
    read_cols = list(dict.fromkeys([*want_cols, column]))
    empty = pl.DataFrame(schema={c: schema[c] for c in want_cols})
    if not wanted or not parts:
        return empty, 0
    lo, hi = wanted[0], wanted[-1]
    pieces: list[pl.DataFrame] = []
    visited = 0
    for part in parts:
        path = root / part.path
        meta, mins, maxs, counts = row_group_ranges(path, column)
        groups: list[int] = []
        for g, (gmin, gmax) in enumerate(zip(mins, maxs, strict=True)):
            if gmin is not None:
                if gmax < lo or gmin > hi:
                    continue
                i = bisect.bisect_left(wanted, gmin)  # the first wanted >= min
                if i == len(wanted) or wanted[i] > gmax:
                    continue
            groups.append(g)
        if not groups:
            continue
        visited += sum(counts[g] for g in groups)
        pieces.append(_read_groups(path, meta, groups, read_cols, counts)
                      .cast({c: schema[c] for c in read_cols}))
    if not pieces:
        return empty, visited
    rows = pl.concat(pieces, how="vertical").filter(pl.col(column).is_in(wanted))
    return rows.select(want_cols), visited



_RANGES: dict[tuple[str, str, bool], tuple[Any, list, list, list[int]]] = {}
_FOOTERS: dict[str, Footer] = {}
_RANGES_KEEP = 64


def row_group_ranges(path: Path, column: str, physical: bool = False
                     ) -> tuple[Any, list, list, list[int]]:
    """A partition's footer and, per row group, the min and max of ``column`` (None when
    the group has no statistics) and its row count. With ``physical``, the values as
    stored (a timestamp's integer count of its unit): converting a timestamp statistic to
    a Python value loads a dataframe library of its own, which a lookup need not pay.

    Parsed once per process and partition: a partition's name is never reused and its file
    never changes, so a cached footer cannot be stale. The footer is pyarrow's, or (in a
    process that has not loaded pyarrow, for a small footer) a :class:`Footer` decoded
    here with the same values; :func:`read_row_groups` reads through whichever it is.
    """
    key = (str(path), column, physical)
    found = _RANGES.get(key)
    if found is not None:
        return found
    if not _arrow_loaded():
        # a short process that has not loaded pyarrow: a small footer is decoded here
        # (the same values), sparing it the import; a loaded pyarrow reads faster
        try:
            footer = _FOOTERS.get(str(path)) or read_footer(path)
        except (OSError, ValueError) as exc:
            raise CorruptStoreError(f"cannot read {path}: {exc}") from None
        ranges = footer.ranges(column, physical) if footer is not None else None
        if footer is not None and ranges is not None:
            _keep(_FOOTERS, str(path), footer)
            return _keep(_RANGES, key, (footer, ranges[0], ranges[1], footer.counts))
    try:
        meta = pq.read_metadata(path)
    except (OSError, pa.ArrowException) as exc:
        raise CorruptStoreError(f"cannot read {path}: {exc}") from None
    names = meta.schema.to_arrow_schema().names
    col = names.index(column) if column in names else -1
    mins: list = []
    maxs: list = []
    rows: list[int] = []
    for g in range(meta.num_row_groups):
        rg = meta.row_group(g)
        stats = rg.column(col).statistics if col >= 0 else None
        if stats is not None and stats.has_min_max:
            mins.append(stats.min_raw if physical else stats.min)
            maxs.append(stats.max_raw if physical else stats.max)
        else:
            mins.append(None)
            maxs.append(None)
        rows.append(rg.num_rows)
    return _keep(_RANGES, key, (meta, mins, maxs, rows))


def _arrow_loaded() -> bool:
    return "pyarrow.parquet" in sys.modules


def _keep(cache: dict, key: Any, value: Any) -> Any:
    """``value``, kept in ``cache`` (the oldest entry dropped past ``_RANGES_KEEP``)."""
    if key not in cache and len(cache) >= _RANGES_KEEP:
        cache.pop(next(iter(cache)))
    cache[key] = value
    return value


#: from this many row groups on, a read goes through Polars even when pyarrow holds the
#: footer: Polars decodes a group about three times faster, but parses the footer again
#: (30 ms for a 10M-row state run's), where pyarrow reads with the footer it holds
POLARS_FROM_GROUPS = 16


def _read_groups(path: Path, meta: Any, groups: Sequence[int], columns: list[str],
                 counts: Sequence[int], where: pl.Expr | None = None) -> pl.DataFrame:
    """Row groups of one file (``counts``: the rows of each of its groups), in the order
    given, keeping the rows ``where`` holds (None: all): through pyarrow when it read the
    footer and the groups are few, else through Polars (each run of adjacent groups as
    one slice of rows, filtered in its own plan)."""
    if not isinstance(meta, Footer) and len(groups) < POLARS_FROM_GROUPS:
        try:
            table = pq.ParquetFile(path, metadata=meta).read_row_groups(list(groups),
                                                                         columns=columns)
        except (OSError, pa.ArrowException) as exc:
            raise CorruptStoreError(f"cannot read {path}: {exc}") from None
        frame = pl.from_arrow(table)
        assert isinstance(frame, pl.DataFrame)  # an Arrow table converts to a frame
        return frame if where is None else frame.filter(where)
    starts = [0]
    for count in counts:
        starts.append(starts[-1] + count)
    runs: list[list[int]] = []  # [first row, rows]
    for g in groups:
        if runs and runs[-1][0] + runs[-1][1] == starts[g]:
            runs[-1][1] += counts[g]
        else:
            runs.append([starts[g], counts[g]])
    scan = _SCANS.get(str(path))
    if scan is None:  # kept: a scan parses its footer once (30 ms for a 10M-row run's)
        scan = _keep(_SCANS, str(path), pl.scan_parquet(path, glob=False))
    # each slice filtered as it is read: 1,000 scattered groups of a 10M-row run hold
    # 4M rows, which a filter after the concatenation held all at once (1.5 GB)
    plans = [scan.slice(first, rows).select(columns) for first, rows in runs]
    if where is not None:
        plans = [plan.filter(where) for plan in plans]
    try:
        frames = pl.collect_all(plans, optimizations=_OWN_PLANS)
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise CorruptStoreError(f"cannot read {path}: {exc}") from None
    if not frames:
        return scan.select(columns).clear().collect()
    return pl.concat(frames, how="vertical") if len(frames) > 1 else frames[0]


_SCANS: dict[str, pl.LazyFrame] = {}
#: each slice read as its own plan: shared as a common subplan, the scan they start from
#: read the whole file once (2.2 s for 100 slices of a 10M-row run, against 0.09 s)
_OWN_PLANS = pl.QueryOptFlags(comm_subplan_elim=False)


def read_row_groups(root: Path, part: Part, groups: Sequence[int], schema: pl.Schema,
                    where: pl.Expr | None = None) -> pl.DataFrame:
    """The given row groups of one partition (its footer parsed once per process), only
    the rows ``where`` holds (None: all)."""
    path = root / part.path
    # only the footer is wanted: the statistics as stored (no conversion)
    meta, _mins, _maxs, counts = row_group_ranges(path, list(schema)[0], physical=True)
    frame = _read_groups(path, meta, groups, list(schema), counts, where)
    return frame if frame.schema == schema else frame.cast(schema)


def read_by_seq(root: Path, parts: Sequence[Part], schema: pl.Schema, seqs: Iterable[int],
                columns: Sequence[str]) -> tuple[pl.DataFrame, int]:
    """Rows whose ``seq`` is in ``seqs``, reading only the partitions and row groups whose
    seq ranges can hold them. Returns the rows and the Parquet rows read."""
    wanted = sorted(set(seqs))
    cols = list(dict.fromkeys(["seq", *columns]))
    sub = pl.Schema({c: schema[c] for c in cols})
    pieces: list[pl.DataFrame] = []
    visited = 0

    def holds(lo: int | None, hi: int | None) -> bool:
        if lo is None or hi is None:
            return True
        i = bisect.bisect_left(wanted, lo)
        return i < len(wanted) and wanted[i] <= hi

    for part in parts:
        if not wanted or not holds(part.seq_lo, part.seq_hi):
            continue
        _meta, mins, maxs, counts = row_group_ranges(root / part.path, "seq")
        groups = [g for g, (lo, hi) in enumerate(zip(mins, maxs, strict=True)) if holds(lo, hi)]
        for g in groups:  # one row group at a time: only the wanted rows are kept
            visited += counts[g]
            rows = read_row_groups(root, part, [g], sub)
            pieces.append(rows.filter(pl.col("seq").is_in(wanted)))
    if not pieces:
        return pl.DataFrame(schema=sub).select(list(columns)), visited
    return pl.concat(pieces).select(list(columns)), visited


def constant(value: Any, n: int, dtype: PolarsDataType) -> pl.Series:
    """``value`` repeated ``n`` times (cheap at any ``n``, also at 1: a commit builds many).

    Examples:
        >>> constant("x", 3, pl.String).to_list()
        ['x', 'x', 'x']
    """
    try:
        one = _one(value, dtype)
    except TypeError:  # a value that cannot be a cache key
        one = pl.Series("", [value], dtype=dtype)
    return one.new_from_index(0, n)


@functools.lru_cache(maxsize=64)
def _one(value: Any, dtype: PolarsDataType) -> pl.Series:
    # a commit asks for the same few (value, type) pairs many times: a Series built from
    # a Python list costs 30 us, one repeated from a kept one a tenth of that
    return pl.Series("", [value], dtype=dtype)
