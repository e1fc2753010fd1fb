"""Every canonical table as a Delta Lake table, from memframe's side (docs/delta.md).

A store keeps Delta logs once asked (``memframe delta sync STORE``, ``store.sync_delta_logs()``
or ``Store.create(path, delta_logs=True)``); then any Delta reader opens
``STORE/<table>``. Before that, a Delta reader's own error is generic (deltalake's
``TableNotFoundError``); :func:`table_path` and :func:`scan` say what is missing and the
command that starts the logs. :func:`duckdb_sql` prints what DuckDB needs to read every
table offline, from the extension file the ``duckdb-ext-delta`` package ships.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from memframe.errors import DeltaLogMissingError, InvalidInputError, MemframeError
from memframe.schema import CANONICAL_TABLES

__all__ = ["table_path", "scan", "duckdb_sql", "duckdb_extension"]


def _root(store: Any) -> Path:
    return Path(getattr(store, "path", store))


def table_path(store: Any, table: str) -> Path:
    """The directory of ``table`` as a Delta table (what ``pl.scan_delta``,
    ``deltalake.DeltaTable`` and DuckDB's ``delta_scan`` open), once its Delta log exists.

    Args:
        store: a ``Store`` (or a frozen view of one) or a store's path.
        table: a canonical table (``"capsules"``, ``"journal"``, ...).

    Raises:
        InvalidInputError: ``table`` is not a canonical table.
        DeltaLogMissingError: the store keeps no Delta log for it yet; the message names
            the command that starts them.

    Examples:
        >>> import memframe as mf, tempfile, os
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
        >>> table_path(store, "capsules")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        memframe.errors.DeltaLogMissingError: .../s/capsules has no Delta log yet: this store keeps none until asked. Start them once with `memframe delta sync .../s` (or mf.Store.open(path).sync_delta_logs()); every later commit keeps them current
        >>> _ = store.sync_delta_logs()
        >>> table_path(store, "capsules").name
        'capsules'
    """
    if table not in CANONICAL_TABLES:
        import difflib

        near = difflib.get_close_matches(table, CANONICAL_TABLES, n=1)
        raise InvalidInputError(
            f"{table!r} is not a canonical table" + (f" (did you mean {near[0]!r}?)" if near
                                                     else "")
            + f"; the Delta tables are {', '.join(CANONICAL_TABLES)}")
    root = _root(store)
    path = root / table
    if not (path / "_delta_log").is_dir():
        raise DeltaLogMissingError(
            f"{path} has no Delta log yet: this store keeps none until asked. Start them once "
            f"with `memframe delta sync {root}` (or mf.Store.open(path).sync_delta_logs()); "
            f"every later commit keeps them current")
    return path


def scan(store: Any, table: str) -> Any:
    """``pl.scan_delta`` of one table, after :func:`table_path`'s check (needs the
    ``deltalake`` package: ``pip install -e ".[delta]"`` from a checkout). Instants come
    back in microseconds (Delta's ``timestamp``); ``store.table(name)`` keeps nanoseconds."""
    import polars as pl

    return pl.scan_delta(str(table_path(store, table)))


def duckdb_sql(store: Any, extension: str | Path) -> str:
    """The SQL that makes every canonical table of ``store`` a DuckDB view through the
    delta extension loaded from its file (``extension``), so nothing is downloaded.

    Examples:
        >>> print(duckdb_sql("/data/my-store", "/x/delta.duckdb_extension").splitlines()[0])
        LOAD '/x/delta.duckdb_extension';
    """
    def quoted(text: str) -> str:
        return "'" + text.replace("'", "''") + "'"

    root = _root(store).resolve()
    lines = [f"LOAD {quoted(str(extension))};"]
    for table in CANONICAL_TABLES:
        lines.append(f"CREATE OR REPLACE VIEW {json.dumps(table)} AS SELECT * FROM "
                     f"delta_scan({quoted(str(root / table))});")
    return "\n".join(lines)


def duckdb_extension() -> Path:
    """The delta extension file the ``duckdb-ext-delta`` package installed into this
    Python (built for the DuckDB release it pins: install both together, e.g.
    ``pip install duckdb==1.4.4 duckdb-ext-delta==1.4.4.20260205``).

    Raises:
        MemframeError: no ``duckdb-ext-delta`` here; the message says how to get it.
    """
    try:
        import duckdb_ext  # type: ignore[import-not-found]
    except ImportError:
        duckdb_ext = None
    found = (next((p for base in duckdb_ext.__path__
                   for p in Path(base).rglob("delta.duckdb_extension")), None)
             if duckdb_ext is not None else None)
    if found is None:
        raise MemframeError(
            "no DuckDB delta extension file in this Python: install the DuckDB release and "
            "the extension package built for it, together (python3 -m pip install "
            "duckdb==1.4.4 duckdb-ext-delta==1.4.4.20260205), or give the file with "
            "--extension PATH (DuckDB's own `INSTALL delta` downloads it, which fails offline)")
    return found
