"""Row-group ranges decoded from a Parquet footer without pyarrow equal pyarrow's, and a
warm digest process never loads pyarrow (nor numpy, networkx, pandera)."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memframe as mf
from memframe.errors import CorruptStoreError
from memframe.store import footer, tables

ROOT = Path(__file__).resolve().parents[2]


def _expected(path: Path, column: str, physical: bool) -> tuple[list, list, list[int]]:
    meta = pq.read_metadata(path)
    names = meta.schema.to_arrow_schema().names
    mins, maxs, counts = [], [], []
    for g in range(meta.num_row_groups):
        rg = meta.row_group(g)
        stats = rg.column(names.index(column)).statistics if column in names else None
        has = stats is not None and stats.has_min_max
        mins.append((stats.min_raw if physical else stats.min) if has else None)
        maxs.append((stats.max_raw if physical else stats.max) if has else None)
        counts.append(rg.num_rows)
    return mins, maxs, counts


def _check_against_pyarrow(path: Path) -> int:
    """Every column, both modes: the decoded ranges are pyarrow's, value and type; returns
    how many (column, mode) pairs were decoded (the rest go to pyarrow)."""
    decoded = footer.read_footer(path)
    assert decoded is not None
    names = pq.read_schema(path).names
    done = 0
    for physical in (False, True):
        for column in [*names, "absent"]:
            ranges = decoded.ranges(column, physical)
            if ranges is None:
                continue
            done += 1
            mins, maxs, counts = _expected(path, column, physical)
            assert decoded.counts == counts
            assert ranges == (mins, maxs), (column, physical)
            assert [type(v) for v in ranges[0]] == [type(v) for v in mins], (column, physical)
    return done


def test_every_plain_type_decodes_as_pyarrow_reads_it(tmp_path):
    n = 300
    frame = pl.DataFrame({
        "i64": list(range(-150, 150)),
        "i32": pl.Series(range(n), dtype=pl.Int32),
        "i8": pl.Series([i % 100 - 50 for i in range(n)], dtype=pl.Int8),
        "u32": pl.Series(range(n), dtype=pl.UInt32),  # unsigned: left to pyarrow
        "f64": [i / 7 for i in range(n)],
        "f32": pl.Series([i / 3 for i in range(n)], dtype=pl.Float32),
        "flag": [i % 3 == 0 for i in range(n)],
        "text": [f"key-{i:04d}-é✓" for i in range(n)],
        "sparse": [None if i < 120 else f"s{i}" for i in range(n)],  # all-null groups
        "at": [dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=i)
               for i in range(n)],
        "day": [dt.date(2026, 1, 1) + dt.timedelta(days=i) for i in range(n)],
        "content": [f"free text {i}" for i in range(n)],  # no statistics written
    })
    part = tables.write_part(tmp_path, "t/part-1.parquet", frame, row_group_rows=64,
                             fsync=False)
    path = tmp_path / part.path
    decoded = footer.read_footer(path)
    assert decoded.counts == [64, 64, 64, 64, 44]
    # what is decoded here (timestamps only as stored; dates, unsigned: pyarrow)
    assert decoded.ranges("at", physical=False) is None
    assert decoded.ranges("day", physical=False) is None
    assert decoded.ranges("u32", physical=False) is None
    assert decoded.ranges("at", physical=True)[0][0] == 1767225600 * 10**6  # as stored: µs
    assert decoded.ranges("content", physical=False) == ([None] * 5, [None] * 5)
    assert decoded.ranges("sparse", physical=False)[0][:2] == [None, "s120"]
    assert _check_against_pyarrow(path) >= 18


@settings(max_examples=40, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(-2**63, 2**63 - 1), st.text(max_size=12),
                               st.none() | st.booleans()), min_size=1, max_size=80),
       group=st.integers(1, 20))
def test_decoded_ranges_equal_pyarrows_for_any_values(tmp_path_factory, rows, group):
    tmp = tmp_path_factory.mktemp("footer")
    frame = pl.DataFrame(rows, schema={"k": pl.Int64, "s": pl.String, "b": pl.Boolean},
                         orient="row")
    part = tables.write_part(tmp, "t/part.parquet", frame, row_group_rows=group, fsync=False)
    assert _check_against_pyarrow(tmp / part.path) == 8  # 3 columns and "absent", 2 modes


def test_other_layouts_are_left_to_pyarrow(tmp_path, monkeypatch):
    nested = pa.table({"n": pa.array([{"a": 1}, {"a": 2}])})
    pq.write_table(nested, tmp_path / "nested.parquet")
    assert footer.read_footer(tmp_path / "nested.parquet") is None
    flat = tmp_path / "flat.parquet"
    pq.write_table(pa.table({"k": list(range(100))}), flat, row_group_size=10)
    monkeypatch.setattr(footer, "MAX_FOOTER_BYTES", 16)  # a large footer: pyarrow's
    assert footer.read_footer(flat) is None


def test_a_damaged_footer_is_a_corrupt_store_never_a_crash(tmp_path, monkeypatch):
    monkeypatch.setattr(tables, "_arrow_loaded", lambda: False)
    frame = pl.DataFrame({"k": list(range(50))})
    part = tables.write_part(tmp_path, "t/part-2.parquet", frame, fsync=False)
    path = tmp_path / part.path
    data = bytearray(path.read_bytes())
    length = int.from_bytes(data[-8:-4], "little")
    data[-8 - length:-8] = b"\xff" * length  # the footer's bytes, overwritten
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptStoreError, match="cannot read"):
        tables.row_group_ranges(path, "k")
    path.write_bytes(b"not parquet at all")
    with pytest.raises(CorruptStoreError, match="cannot read"):
        tables.row_group_ranges(path, "k")


@pytest.mark.parametrize("groups", [[0], [2, 3], [3, 1], [0, 1, 2, 3, 4]])
def test_row_groups_read_without_pyarrow_equal_pyarrows(tmp_path, monkeypatch, groups):
    schema = pl.Schema({"k": pl.String, "n": pl.Int64,
                        "at": pl.Datetime("ns", "UTC")})
    frame = pl.DataFrame({"k": [f"k{i:03d}" for i in range(70)], "n": list(range(70)),
                          "at": [dt.datetime(2026, 5, 1, tzinfo=dt.UTC)] * 70}, schema=schema)
    part = tables.write_part(tmp_path, "t/part-3.parquet", frame, row_group_rows=16,
                             fsync=False)
    entry = part
    read = {}
    for loaded in (True, False):
        monkeypatch.setattr(tables, "_arrow_loaded", lambda loaded=loaded: loaded)
        tables._RANGES.clear()
        tables._FOOTERS.clear()
        meta = tables.row_group_ranges(tmp_path / part.path, "k", physical=True)[0]
        assert isinstance(meta, footer.Footer) is (not loaded)
        rows = tables.read_row_groups(tmp_path, entry, groups, schema)
        matched = tables.read_matching(tmp_path, [entry], schema, "k", ["k005", "k040"])
        read[loaded] = (rows, matched)
    (pa_rows, pa_match), (own_rows, own_match) = read[True], read[False]
    assert own_rows.equals(pa_rows) and own_rows.schema == schema
    assert own_rows.get_column("n").to_list() == [n for g in groups
                                                  for n in range(16 * g, min(16 * g + 16, 70))]
    assert own_match[0].equals(pa_match[0]) and own_match[1] == pa_match[1] == 32


@pytest.mark.parametrize("groups", [[0], [2, 3], [3, 1], [4, 0, 1, 2, 3]])
def test_many_row_groups_read_through_polars_equal_pyarrows(tmp_path, monkeypatch, groups):
    # pyarrow holds the footer; from POLARS_FROM_GROUPS groups on, Polars decodes them
    schema = pl.Schema({"k": pl.String, "n": pl.Int64, "b": pl.Boolean,
                        "at": pl.Datetime("ns", "UTC")})
    frame = pl.DataFrame({"k": [f"k{i:03d}" for i in range(70)], "n": list(range(70)),
                          "b": [None if i % 5 == 0 else i % 2 == 0 for i in range(70)],
                          "at": [dt.datetime(2026, 5, 1, tzinfo=dt.UTC), None] * 35},
                         schema=schema)
    part = tables.write_part(tmp_path, "t/part-4.parquet", frame, row_group_rows=16,
                             fsync=False)
    monkeypatch.setattr(tables, "_arrow_loaded", lambda: True)
    read = {}
    for threshold in (10**9, 1):
        monkeypatch.setattr(tables, "POLARS_FROM_GROUPS", threshold)
        tables._RANGES.clear()
        read[threshold] = tables.read_row_groups(tmp_path, part, groups, schema)
        matched = tables.read_matching(tmp_path, [part], schema, "k", ["k005", "k040"])
        assert matched[0].get_column("n").to_list() == [5, 40] and matched[1] == 32
    assert read[1].equals(read[10**9]) and read[1].schema == schema
    assert read[1].get_column("n").to_list() == [n for g in groups
                                                 for n in range(16 * g, min(16 * g + 16, 70))]


def test_a_warm_digest_process_loads_no_pyarrow_numpy_networkx_or_pandera(tmp_path, clock):
    store = mf.Store.create(tmp_path / "s", clock=clock)
    ids = store.ingest([{"content": f"note {i}", "source": "s", "anchor": f"a{i}",
                         "kind": "epic" if i == 0 else "task",
                         "conversation_id": f"c{i % 4}"} for i in range(40)])
    store.relate(ids[1], ids[2], "blocks")
    store.relate(ids[3], ids[0], "grounded_in")
    store.record_recall(ids[:5])
    store.memory.run_cycle()  # warm
    code = ("import sys\nfrom memframe.cli import main\n"
            f"rc = main(['digest', {str(tmp_path / 's')!r}, '--format', 'json'])\n"
            "print(sorted(m for m in ('pyarrow', 'numpy', 'networkx', 'pandera')"
            " if m in sys.modules))\nsys.exit(rc)")
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip().splitlines()[-1] == "[]", run.stdout[-300:]


@pytest.mark.parametrize("reader", ["pyarrow", "polars"])
def test_row_groups_read_with_a_filter_keep_the_rows_it_holds(tmp_path: Path, reader: str):
    """`tables._read_groups` filters each group as it reads it (a large keyed read keeps
    its rows, not its groups'): through pyarrow (its footer, few groups) and through
    Polars (a decoded footer, a slice per run of groups) alike, in the order asked."""
    from memframe.store import tables
    from memframe.store.footer import read_footer

    path = tmp_path / "part.parquet"
    frame = pl.DataFrame({"k": list(range(100)), "v": [f"v{i}" for i in range(100)]})
    pq.write_table(frame.to_arrow(), path, row_group_size=10)
    meta = pq.ParquetFile(path).metadata if reader == "pyarrow" else read_footer(path)
    assert meta is not None
    groups, counts = [7, 2, 3, 9], [10] * 10
    where = pl.col("k").is_in([21, 25, 33, 34, 71, 95, 96])
    got = tables._read_groups(path, meta, groups, ["k", "v"], counts, where)
    assert got.get_column("k").to_list() == [71, 21, 25, 33, 34, 95, 96]
    assert got.get_column("v").to_list() == ["v71", "v21", "v25", "v33", "v34", "v95", "v96"]
    whole = tables._read_groups(path, meta, groups, ["k", "v"], counts)
    assert whole.height == 40 and whole.filter(where).equals(got)
