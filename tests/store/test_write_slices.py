"""A partition is written a slice of whole row groups at a time (`tables.WRITE_ROWS`), so
a large frame's Arrow copy is never held whole; the file is byte for byte the one a single
write of the whole frame makes."""

from __future__ import annotations

import io

import polars as pl
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from memframe.store import tables


def _whole(frame: pl.DataFrame, row_group_rows: int) -> bytes:
    table = frame.to_arrow()
    buf = io.BytesIO()
    pq.write_table(table, buf, row_group_size=row_group_rows,
                   write_statistics=[n for n in table.column_names
                                     if n not in tables._NO_STATISTICS],
                   use_dictionary=[n for n in table.column_names
                                   if n not in tables._NO_DICTIONARY],
                   compression=tables.codec(frame.estimated_size(), row_group_rows))
    return buf.getvalue()


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 700), group=st.sampled_from([1, 3, 64, 500, 65536]),
       step=st.sampled_from([1, 10, 128, 256 * 1024]))
def test_a_partition_written_in_slices_is_the_file_written_at_once(tmp_path_factory, n, group,
                                                                   step):
    tables_write_rows = tables.WRITE_ROWS
    frame = pl.DataFrame({
        "id": [f"cap-{i}" for i in range(n)],
        "content": [None if i % 7 == 0 else "é" * (i % 40) for i in range(n)],
        "seq": list(range(n)), "flag": [i % 3 == 0 for i in range(n)],
        "tags": [[f"t{i % 5}"] * (i % 3) for i in range(n)],
    }, schema={"id": pl.String, "content": pl.String, "seq": pl.Int64, "flag": pl.Boolean,
               "tags": pl.List(pl.String)})
    root = tmp_path_factory.mktemp("w")
    try:
        tables.WRITE_ROWS = step
        part = tables.write_part(root, "t/p.parquet", frame, row_group_rows=group, fsync=False)
    finally:
        tables.WRITE_ROWS = tables_write_rows
    written = (root / "t/p.parquet").read_bytes()
    assert written == _whole(frame, group)
    assert part.rows == n and pl.read_parquet(root / "t/p.parquet").equals(frame)
    if n > step:  # more than one slice was written, and the row groups are whole
        groups = pq.ParquetFile(root / "t/p.parquet").metadata.num_row_groups
        assert groups == -(-n // group)
