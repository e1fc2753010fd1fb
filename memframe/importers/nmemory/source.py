"""The source: an nMEMORY SQLite file, opened read-only, read in one snapshot."""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from memframe.errors import (
    ImportSourceError,
)
from memframe.importers.nmemory.common import (
    _TAIL_COLUMNS,
    DEFAULT_BATCH_ROWS,
    MIGRATING_RELEASE,
    OPTIONAL_COLUMNS,
    OPTIONAL_TABLES,
    SCHEMA_VERSION,
    SCHEMA_VERSIONS,
    SQLITE_HEADER,
    seq_tables_for,
    tables_for,
)

# ---- the source --------------------------------------------------------------------------

def version_advice(path: Path | str, version: Any) -> str:
    """Why a file of schema ``version`` is not read, and what to do about it.

    Examples:
        >>> print(version_advice("m.db", 11))  # doctest: +ELLIPSIS
        m.db has nMEMORY schema version 11 (nMEMORY 0.1.x); ... open it once with nMEMORY 0.3.0, ...
    """
    known = " and ".join(f"{v} (nMEMORY {r})" for v, r in SCHEMA_VERSIONS.items())
    release = " (nMEMORY 0.1.x)" if version in (10, 11) else ""
    head = f"{path} has nMEMORY schema version {version}{release}; this importer reads {known}"
    if isinstance(version, int) and version > SCHEMA_VERSION:
        return (f"{head}, and no nMEMORY release migrates a store down: import it with a "
                f"memframe release that reads schema {version}")
    if isinstance(version, int) and 0 < version < SCHEMA_VERSION:
        return (f"{head}: open it once with nMEMORY {MIGRATING_RELEASE}, which migrates an "
                f"older store to schema {SCHEMA_VERSION} in place (back up the file and its "
                f".hmac-key sibling first: the migration is one-way), then import again")
    return f"{head}: it is not an nMEMORY store, or it is damaged"


class _Source:
    """A read-only connection to an nMEMORY file, reading one consistent snapshot."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.read_rows: dict[str, int] = {}
        if not self.path.is_file():
            what = "does not exist" if not self.path.exists() else "is not a file"
            raise ImportSourceError(f"{self.path} {what}; pass the nMEMORY SQLite file "
                                    f"(e.g. ~/.nmemory/memory.db)")
        with open(self.path, "rb") as fh:
            head = fh.read(len(SQLITE_HEADER))
        if head != SQLITE_HEADER:
            raise ImportSourceError(
                f"{self.path} is not a SQLite database (it does not start with the SQLite "
                f"header); pass the nMEMORY store file"
            )
        uri = self.path.resolve().as_uri() + "?mode=ro"
        try:
            self.con = sqlite3.connect(uri, uri=True, isolation_level=None)
        except sqlite3.Error as exc:
            raise ImportSourceError(f"cannot open {self.path} read-only: {exc}") from None
        try:
            self.con.execute("BEGIN")  # one read snapshot for the whole import
            version = self.scalar("PRAGMA user_version")
            if version not in SCHEMA_VERSIONS:
                raise ImportSourceError(version_advice(self.path, version))
            self.version: int = int(version)
            self.tables = tables_for(self.version)
            self.seq_tables = seq_tables_for(self.version)
            self.objects = {
                name: (kind, sql or "")
                for name, kind, sql in self.con.execute(
                    "SELECT name, type, sql FROM sqlite_master WHERE type = 'table'"
                )
            }
            self._check_tables()
        except sqlite3.Error as exc:
            self.close()
            raise ImportSourceError(f"{self.path} cannot be read as an nMEMORY store: {exc}; "
                                    f"the file is damaged") from None
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        with contextlib.suppress(sqlite3.Error):
            self.con.close()

    def columns(self, table: str) -> dict[str, pl.DataType]:
        """The columns read from ``table``: the required ones and the optional ones it has."""
        return {**self.tables[table], **self._optional.get(table, {})}

    def _check_tables(self) -> None:
        self._optional: dict[str, dict[str, pl.DataType]] = {}
        self.tables = {t: c for t, c in self.tables.items()
                       if t not in OPTIONAL_TABLES or t in self.objects}
        missing = [t for t in self.tables if t not in self.objects]
        if missing:
            raise ImportSourceError(
                f"{self.path} lacks table(s) {', '.join(missing)} of the schema v"
                f"{self.version} layout; it is damaged or not an nMEMORY store"
            )
        for table, columns in self.tables.items():
            have = {row[1] for row in self.con.execute(f'PRAGMA table_info("{table}")')}
            self._optional[table] = {c: t for c, t in OPTIONAL_COLUMNS.get(table, {}).items()
                                     if c in have}
            lacking = [c for c in columns if c not in have]
            if lacking:
                raise ImportSourceError(
                    f"{self.path}: table {table} lacks column(s) {', '.join(lacking)} of the "
                    f"schema v{self.version} layout"
                )

    def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        try:
            row = self.con.execute(sql, list(params)).fetchone()
        except sqlite3.Error as exc:
            raise ImportSourceError(f"cannot read {self.path}: {exc}") from None
        return None if row is None else row[0]

    def _sql(self, table: str, where: str, order: str) -> str:
        cols = ", ".join(f'"{c}"' for c in self.columns(table))
        sql = f'SELECT {cols} FROM "{table}"'
        if where:
            sql += f" WHERE {where}"
        if order:
            sql += f" ORDER BY {order}"
        return sql

    def read(self, table: str, where: str = "", params: Sequence[Any] = (),
             order: str = "") -> pl.DataFrame:
        """One source table (columns of SOURCE_TABLES) as a frame."""
        frames = list(self.batches(table, where, params, order, batch_rows=None))
        if not frames:
            return pl.DataFrame(schema=self.columns(table))
        return pl.concat(frames) if len(frames) > 1 else frames[0]

    def batches(self, table: str, where: str = "", params: Sequence[Any] = (), order: str = "",
                *, batch_rows: int | None = DEFAULT_BATCH_ROWS) -> Iterator[pl.DataFrame]:
        """A source table in batches of ``batch_rows`` rows (all at once when None)."""
        sql = self._sql(table, where, order)
        schema = self.columns(table)
        self.read_rows.setdefault(table, 0)
        try:
            if batch_rows is None:
                frames: Any = [pl.read_database(sql, self.con, schema_overrides=schema,
                                                execute_options={"parameters": list(params)})]
            else:
                frames = pl.read_database(sql, self.con, iter_batches=True,
                                          batch_size=batch_rows, schema_overrides=schema,
                                          execute_options={"parameters": list(params)})
            for frame in frames:
                self.read_rows[table] += frame.height
                yield frame
        except (sqlite3.Error, pl.exceptions.PolarsError, TypeError, ValueError) as exc:
            raise ImportSourceError(f"cannot read table {table} of {self.path}: {exc}") from None

    def count(self, table: str, where: str = "", params: Sequence[Any] = ()) -> int:
        return int(self.scalar(f'SELECT COUNT(*) FROM "{table}"' + (f" WHERE {where}" if where
                                                                     else ""), params))

    def tail(self, table: str, seq: int) -> str | None:
        """A fingerprint of the row ``seq`` of an append-only table (None if absent)."""
        cols = _TAIL_COLUMNS[table]
        try:
            row = self.con.execute(
                f'SELECT {", ".join(cols)} FROM "{table}" WHERE seq = ?', [seq]
            ).fetchone()
        except sqlite3.Error as exc:
            raise ImportSourceError(f"cannot read {self.path}: {exc}") from None
        if row is None:
            return None
        return hashlib.sha256(json.dumps(list(row), ensure_ascii=False).encode()).hexdigest()

    def fingerprint(self, table: str, seq: int) -> str:
        """A sha256 of every row up to ``seq`` of an append-only table (the columns of
        its tail fingerprint, in seq order): an in-place edit of an imported row changes it."""
        cols = _TAIL_COLUMNS[table]
        digest = hashlib.sha256()
        try:
            cursor = self.con.execute(
                f'SELECT {", ".join(cols)} FROM "{table}" WHERE seq <= ? ORDER BY seq', [seq])
            while rows := cursor.fetchmany(50_000):
                digest.update(json.dumps(rows, ensure_ascii=False, default=str).encode())
        except sqlite3.Error as exc:
            raise ImportSourceError(f"cannot read {self.path}: {exc}") from None
        return digest.hexdigest()

    def skipped_tables(self) -> dict[str, int | None]:
        """Tables the importer does not read, with their row counts."""
        virtual = [n for n, (_k, sql) in self.objects.items()
                   if sql.upper().startswith("CREATE VIRTUAL TABLE")]
        out: dict[str, int | None] = {}
        for name in sorted(self.objects):
            if name in self.tables or name.startswith("sqlite_"):
                continue
            if any(name != v and name.startswith(v + "_") for v in virtual):
                continue  # a virtual table's shadow table (FTS5 data, index, ...)
            try:
                out[name] = int(self.con.execute(f'SELECT COUNT(*) FROM "{name}"').fetchone()[0])
            except sqlite3.Error:
                out[name] = None
        return out

    def outcome_ids(self) -> list[str]:
        """The outcome ids the source issued (``out-<n>``; none when it has no such table)."""
        if "outcomes" not in self.objects:
            return []
        try:
            return [row[0] for row in self.con.execute("SELECT id FROM outcomes")]
        except sqlite3.Error as exc:
            raise ImportSourceError(f"cannot read table outcomes of {self.path}: {exc}") from None

    def refuse_non_integers(self, table: str, column: str, key: str, what: str) -> None:
        """Refuse a row whose ``column`` SQLite stores as anything but an integer (a
        declared INTEGER column still holds 2.5 or '2' if a writer put it there): read as
        an integer, it would be silently truncated or coerced."""
        try:
            row = self.con.execute(
                f'SELECT "{key}", "{column}", typeof("{column}") FROM "{table}" '
                f'WHERE typeof("{column}") NOT IN (\'integer\', \'null\') LIMIT 1').fetchone()
        except sqlite3.Error as exc:
            raise ImportSourceError(f"cannot read table {table} of {self.path}: {exc}") from None
        if row is not None:
            raise ImportSourceError(
                f"{table} row {key}={row[0]!r}: {column} {row[1]!r} is stored as {row[2]}, not "
                f"an integer; {what}, so the source is corrupt (nothing is truncated or "
                f"coerced on import)"
            )

    def identity(self) -> dict[str, str | None]:
        """What names this source whatever its path: its first capsule and audit row."""
        return {
            "capsule_1": self.scalar("SELECT source_hash FROM capsules ORDER BY seq LIMIT 1"),
            "audit_1": self.scalar("SELECT chained_hash FROM audit_events ORDER BY seq LIMIT 1"),
        }


