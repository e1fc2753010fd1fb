"""Three independent Delta Lake readers, for comparing a store's tables with what they see.

- ``deltalake`` (delta-rs): its own query engine (``QueryBuilder``), which reads the
  nanosecond files under the Delta ``timestamp`` type as microseconds;
- ``pl.scan_delta`` (Polars, over deltalake's log reader);
- DuckDB's ``delta_scan``: the ``duckdb-ext-delta`` package ships the extension built for
  DuckDB 1.4.4, so it runs in a side environment (a venv made once under the user's cache,
  DuckDB pinned to that release) and hands its rows back as Parquet. The extension is
  loaded from the file the package installs (``allow_unsigned_extensions``); nothing is
  downloaded by DuckDB itself.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import deltalake
import polars as pl
import polars.selectors as cs
import pyarrow as pa

import memframe as mf
from memframe.schema import CANONICAL_TABLES

DUCKDB_PIN = "duckdb==1.4.4"
DUCKDB_DELTA_PIN = "duckdb-ext-delta==1.4.4.20260205"
_SIDE_ENV = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / (
    "memframe-tests/duckdb-1.4.4-delta")

_DUCKDB_SCRIPT = textwrap.dedent("""
    import json, pathlib, sys
    import duckdb, duckdb_ext
    ext = next(pathlib.Path(duckdb_ext.__path__[0]).rglob("delta.duckdb_extension"))
    con = duckdb.connect(config={"allow_unsigned_extensions": "true",
                                 "autoinstall_known_extensions": "false",
                                 "autoload_known_extensions": "false"})
    con.execute("LOAD ?".replace("?", "'" + str(ext) + "'"))
    for table_dir, out in json.loads(sys.argv[1]):
        con.execute(f"COPY (SELECT * FROM delta_scan('{table_dir}')) TO '{out}' (FORMAT parquet)")
""")


def duckdb_python() -> Path:
    """The side environment's interpreter (made once: a venv with DuckDB 1.4.4 and the
    delta extension package, installed from PyPI by pip)."""
    python = _SIDE_ENV / "bin" / "python"
    ready = _SIDE_ENV / "ready"
    _SIDE_ENV.parent.mkdir(parents=True, exist_ok=True)
    with open(_SIDE_ENV.parent / ".duckdb-delta.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not ready.exists():
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(_SIDE_ENV)],
                           check=True, capture_output=True)
            install = subprocess.run(
                [str(python), "-m", "pip", "install", "-q", DUCKDB_PIN, DUCKDB_DELTA_PIN],
                capture_output=True, text=True)
            assert install.returncode == 0, (
                f"the DuckDB reader's side environment could not be installed (PyPI must be "
                f"reachable once): {install.stderr[-2000:]}")
            ready.write_text(f"{DUCKDB_PIN} {DUCKDB_DELTA_PIN}\n")
    return python


def read_duckdb(root: Path, tables: list[str], scratch: Path) -> dict[str, pl.DataFrame]:
    """Each table as DuckDB's ``delta_scan`` returns it."""
    scratch.mkdir(parents=True, exist_ok=True)
    jobs = [(str(root / t), str(scratch / f"{t}.parquet")) for t in tables]
    run = subprocess.run([str(duckdb_python()), "-c", _DUCKDB_SCRIPT, json.dumps(jobs)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    out = {}
    for table, (_, path) in zip(tables, jobs, strict=True):
        out[table] = pl.read_parquet(path)
        os.unlink(path)
    return out


def read_deltalake(table_dir: Path, version: int | None = None) -> pl.DataFrame:
    """The table as deltalake's own engine (DataFusion) returns it."""
    dt = deltalake.DeltaTable(str(table_dir), version=version)
    result = deltalake.QueryBuilder().register("t", dt).execute("select * from t").read_all()
    return pl.from_arrow(pa.table(result))


def read_polars(table_dir: Path, version: int | None = None) -> pl.DataFrame:
    return pl.scan_delta(str(table_dir), version=version).collect()


def as_delta_sees(frame: pl.DataFrame) -> pl.DataFrame:
    """memframe's rows as a Delta reader gets them: instants in microseconds (truncated)."""
    return frame.with_columns(cs.datetime().dt.cast_time_unit("us"))


def normal(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.sort("seq").with_columns(cs.datetime().dt.replace_time_zone("UTC"))


def assert_same(expected: pl.DataFrame, got: pl.DataFrame, what: str) -> None:
    expected, got = normal(as_delta_sees(expected)), normal(got)
    assert got.columns == expected.columns, (what, got.columns, expected.columns)
    assert got.schema == expected.schema, (what, got.schema, expected.schema)
    assert got.equals(expected), (what, expected, got)


def assert_readers_match(store: mf.Store, scratch: Path, *, duckdb: bool = True,
                         tables: list[str] | None = None) -> None:
    """Every canonical table, through every reader, equals ``store.table(name)``."""
    names = list(tables or CANONICAL_TABLES)
    root = Path(store.path)
    seen = {t: {"deltalake": read_deltalake(root / t), "polars": read_polars(root / t)}
            for t in names}
    if duckdb:
        for t, frame in read_duckdb(root, names, scratch).items():
            seen[t]["duckdb"] = frame
    for t in names:
        expected = store.table(t).collect()
        for reader, frame in seen[t].items():
            assert_same(expected, frame, f"{t} via {reader}")
