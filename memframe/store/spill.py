"""Rows too many to hold until a commit lands, spilled to a file of their own.

A commit holds what it stages until it lands. The rebuild stages the digest state's
stored row of every capsule: at tens of millions of capsules that alone outgrows a
laptop's memory. `RowSpill` writes such rows a piece at a time, as they are computed, to a
Parquet file in a temporary directory (outside the store: no reader or vacuum of the store
ever sees it), and `SpilledRows` stands for them in `Commit.write_derived`: the landing
copies them into the partition a slice of whole row groups at a time
(`memframe.store.tables.write_part`), so the partition is the file a frame of the same
rows would make. The temporary file goes with the last reference to its rows.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Any

import polars as pl

from memframe.errors import InvalidInputError

__all__ = ["RowSpill", "SpilledRows"]

#: rows per row group of a spill file (a slice the landing reads decodes about this many)
SPILL_GROUP_ROWS = 128 * 1024


class SpilledRows:
    """Rows on disk with the few frame operations a staged derived table needs: their
    ``height``, ``schema``, a ``select`` (lazy), a ``slice`` read back, a column, and an
    empty ``clear``."""

    def __init__(self, scan: pl.LazyFrame, height: int, owner: Any) -> None:
        self._scan = scan
        self.height = height
        self._owner = owner  # the temporary directory: removed when no rows need it

    @property
    def schema(self) -> pl.Schema:
        return self._scan.collect_schema()

    @property
    def columns(self) -> list[str]:
        return self.schema.names()

    def select(self, *exprs: Any) -> SpilledRows:
        return SpilledRows(self._scan.select(*exprs), self.height, self._owner)

    def slice(self, offset: int, length: int | None = None) -> pl.DataFrame:
        return self._scan.slice(offset, length).collect()

    def get_column(self, name: str) -> pl.Series:
        return self._scan.select(name).collect().to_series()

    def __getitem__(self, name: str) -> pl.Series:
        return self.get_column(name)

    def clear(self) -> pl.DataFrame:
        return pl.DataFrame(schema=self.schema)

    def sort(self, by: list[str]) -> pl.DataFrame:
        """Every row, sorted, in memory (what spilling avoids: the writers spill rows
        already in order)."""
        return self._scan.sort(by).collect()

    def collect(self) -> pl.DataFrame:
        return self._scan.collect()


_PREFIX = "memframe-spill-"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def _sweep(parent: Path) -> None:
    """Remove the spill directories of processes that ended without removing theirs (a
    crash, a kill): their names carry the process id."""
    for entry in parent.glob(f"{_PREFIX}*-*"):
        pid = entry.name[len(_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)


class _Directory:
    """A temporary directory, removed (silently) when the last object holding it goes, or
    by the next spill after its process died without removing it."""

    def __init__(self) -> None:
        parent = Path(tempfile.gettempdir())
        _sweep(parent)
        self.path = Path(tempfile.mkdtemp(prefix=f"{_PREFIX}{os.getpid()}-", dir=parent))
        weakref.finalize(self, shutil.rmtree, self.path, ignore_errors=True)


class RowSpill:
    """Writes rows of one schema a piece at a time; `rows` hands them over as
    `SpilledRows`.

    Examples:
        >>> spill = RowSpill(pl.Schema({"num": pl.Int64(), "tier": pl.String()}))
        >>> spill.add(pl.DataFrame({"num": [1, 2], "tier": ["a", "b"]}))
        >>> spill.add(pl.DataFrame({"num": [3], "tier": [None]}, schema=spill.schema))
        >>> rows = spill.rows()
        >>> rows.height, rows.slice(1, 2)["num"].to_list()
        (3, [2, 3])
    """

    def __init__(self, schema: pl.Schema) -> None:
        self.schema = schema
        self._dir = _Directory()
        self._path = self._dir.path / "rows.parquet"
        self._writer: Any = None
        self._height = 0

    def add(self, frame: pl.DataFrame) -> None:
        """Append ``frame``'s rows (the spill's schema, in that column order)."""
        if frame.schema != self.schema:
            raise InvalidInputError(f"RowSpill.add: rows of schema {frame.schema} do not "
                                    f"match the spill's {self.schema}")
        if not frame.height:
            return
        table = frame.to_arrow()
        if self._writer is None:
            import pyarrow.parquet as pq

            self._writer = pq.ParquetWriter(self._path, table.schema, compression="lz4")
        self._writer.write_table(table, row_group_size=SPILL_GROUP_ROWS)
        self._height += frame.height

    def rows(self) -> SpilledRows:
        """The rows added, on disk (no more may be added)."""
        if self._writer is not None:
            self._writer.close()
            self._writer = None
            scan = pl.scan_parquet(self._path, schema=self.schema)
        else:
            scan = pl.LazyFrame(schema=self.schema)
        return SpilledRows(scan, self._height, self._dir)
