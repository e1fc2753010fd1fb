"""Import an nMEMORY store (one SQLite file, schema v20) into a memframe store.

The mapping follows spec/digest-reference.md section 6 (the SQLite schema) and sections 2
and 4 (what each column means). One import is one memframe commit:

* ``capsules`` -> ``capsules``: ``canonical_json`` (Capsule v1) decoded into the capsule
  columns; ids, seq order and ``created_at`` kept exactly (nanoseconds); ``session_id``
  becomes ``conversation_id``. A tombstoned capsule (NULL JSON) becomes a capsule row
  without content (``content_chars`` 0: the source no longer holds the text) plus a
  ``forgets`` row with the tombstone's mode (``purged`` -> ``purge``, ``redacted`` ->
  ``redact``), time and reason.
* ``usage`` -> one ``recalls`` row per capsule (count = recall_count, at =
  last_recalled_at), exact under the sum/max fold.
* ``sessions`` -> ``brackets`` start/finish rows; ``classifications``, ``tiers``,
  ``relations`` (with origin), ``recall_misses``, ``lane_overrides``, ``corroborations``
  and ``source_cursors`` map one to one.
* ``audit_events`` -> ``journal`` rows keeping the audit seq and ``chained_hash``, so the
  chain verifies with memframe's own verifier. The import adds no journal row of its own.
* ``review_events`` -> ``reviews`` and ``pin_events`` -> ``pins`` (``pinned`` 0/1 becomes a
  boolean), one row per event in seq order: the staged and pinned state of the digest
  (reference 2.1, 2.2, 4.17) is the latest row per capsule, as in the source.

Importing again into the same store appends only what changed since the last import
(watermark ``import:nmemory`` in the store's log) and refuses a source that was rewritten
in a way that cannot be an append.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import sqlite3
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from memframe import schema as S
from memframe.errors import (
    ImportSourceError,
    MemframeError,
    SchemaValidationError,
    SourceRewrittenError,
)
from memframe.ids import capsule_number_expr
from memframe.state import latest_by_seq
from memframe.store import Store, StoreView, capture
from memframe.store.log import MARKER
from memframe.text import INSTANT_MAX, INSTANT_MIN, rfc3339

__all__ = [
    "import_nmemory",
    "ImportReport",
    "ImportSourceError",
    "SourceRewrittenError",
    "SCHEMA_VERSION",
    "WATERMARK",
]

SCHEMA_VERSION = 20
WATERMARK = "import:nmemory"
OPERATION = "import:nmemory"
SQLITE_HEADER = b"SQLite format 3\x00"
#: ``source`` of a capsule row whose tombstone kept no provenance source.
TOMBSTONE_SOURCE = "nmemory-tombstone"
DEFAULT_BATCH_ROWS = 100_000
_IN_CHUNK = 900  # host parameters per IN (...) list

_S, _I = pl.String, pl.Int64
#: the source columns read, per table (spec/digest-reference.md section 6)
SOURCE_TABLES: dict[str, dict[str, pl.DataType]] = {
    "capsules": {"seq": _I, "id": _S, "canonical_json": _S, "created_at": _S,
                 "source_hash": _S, "project_id": _S, "authority_class": _S,
                 "valid_from": _S, "session_id": _S},
    "tombstones": {"capsule_id": _S, "mode": _S, "at": _S, "reason": _S,
                   "provenance_source": _S, "provenance_anchor": _S},
    "relations": {"kind": _S, "from_id": _S, "to_id": _S, "at": _S, "origin": _S},
    "usage": {"capsule_id": _S, "recall_count": _I, "last_recalled_at": _S},
    "classifications": {"capsule_id": _S, "kind": _S, "scope": _S, "at": _S},
    "tiers": {"capsule_id": _S, "tier": _S, "at": _S},
    "sessions": {"session_id": _S, "started_at": _S, "finished_at": _S, "summary": _S},
    "audit_events": {"seq": _I, "at": _S, "actor": _S, "action": _S, "subject": _S,
                     "reason": _S, "chained_hash": _S},
    "recall_misses": {"seq": _I, "term": _S, "outcome": _S, "at": _S},
    "lane_overrides": {"seq": _I, "forced": _S, "auto_pick": _S, "at": _S},
    "corroborations": {"seq": _I, "capsule_id": _S, "source": _S, "kind": _S, "ref": _S,
                       "verdict": _S, "detail": _S, "at": _S},
    "source_cursors": {"source_key": _S, "cursor": _S, "at": _S},
    "review_events": {"seq": _I, "capsule_id": _S, "verdict": _S, "reason": _S, "actor": _S,
                      "at": _S},
    "pin_events": {"seq": _I, "capsule_id": _S, "pinned": _I, "reason": _S, "actor": _S,
                   "at": _S},
}
#: append-only source tables keyed by seq: a re-import reads only rows past the watermark
_SEQ_TABLES = ("capsules", "audit_events", "recall_misses", "lane_overrides", "corroborations",
               "review_events", "pin_events")
#: columns fingerprinted for the last imported row of each seq table (canonical_json is
#: left out: tombstoning a capsule legitimately nulls it later)
_TAIL_COLUMNS = {
    "capsules": ("seq", "id", "created_at", "source_hash", "project_id"),
    "audit_events": ("seq", "at", "actor", "action", "subject", "reason", "chained_hash"),
    "recall_misses": ("seq", "term", "outcome", "at"),
    "lane_overrides": ("seq", "forced", "auto_pick", "at"),
    "corroborations": ("seq", "capsule_id", "source", "kind", "ref", "verdict", "detail", "at"),
    "review_events": ("seq", "capsule_id", "verdict", "reason", "actor", "at"),
    "pin_events": ("seq", "capsule_id", "pinned", "reason", "actor", "at"),
}
#: the watermark of a seq table an earlier import did not read yet (nothing imported)
_NO_MARK = {"seq": 0, "rows": 0, "tail": None}
_FORGET_MODES = {"purged": "purge", "redacted": "redact"}

_CAPSULE_V1 = pl.Struct({
    "content": pl.String,
    "provenance": pl.Struct({"source": pl.String, "anchor": pl.String,
                             "source_hash": pl.String}),
    "confidence": pl.Float64,
    "freshness": pl.Struct({"valid_from": pl.String, "valid_to": pl.String}),
    "scope": pl.Struct({"project_id": pl.String}),
    "authority_class": pl.String,
    "instruction_taint": pl.Boolean,
})
_RFC3339 = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$"
_CANONICAL = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{0,8}[1-9])?Z$"
_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S%.f%#z"
_HEX64 = r"^[0-9a-f]{64}$"


# ---- the report --------------------------------------------------------------------------

@dataclasses.dataclass
class ImportReport:
    """What one import read and wrote.

    Attributes:
        source: the SQLite file read.
        store: the memframe store written.
        mode: ``"full"`` (first import), ``"incremental"`` (appended what changed) or
            ``"unchanged"`` (nothing changed since the last import; nothing committed).
        generation: the store generation after the import.
        source_rows: rows in each imported source table at import time.
        read: rows this import actually read from each source table (a re-import reads
            only the append-only tables' new rows).
        added: rows appended to each memframe table by this import.
        erased: capsules whose content this import erased (newly tombstoned).
        skipped: source tables the digest does not read (not imported), with row counts
            (None where the table could not be counted).
        notes: things worth knowing about this source (rows left out, timestamps
            normalised to UTC ``Z`` text, ...).
        seconds: wall time of the import.
    """

    source: str
    store: str
    mode: str
    generation: int
    source_rows: dict[str, int]
    read: dict[str, int]
    added: dict[str, int]
    erased: int
    skipped: dict[str, int | None]
    notes: list[str]
    seconds: float

    @property
    def rows_written(self) -> int:
        """Rows appended to the store (every table)."""
        return sum(self.added.values())

    @property
    def rows_per_second(self) -> float:
        """Source rows read per second of wall time."""
        return sum(self.read.values()) / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """The report as plain data (JSON-serialisable)."""
        return dataclasses.asdict(self)

    def __str__(self) -> str:
        lines = [
            f"nMEMORY import ({self.mode}) {self.source} -> {self.store}",
            f"generation {self.generation}; {self.rows_written:,} rows written in "
            f"{self.seconds:.2f}s" + (f"; {self.erased} capsule content(s) erased"
                                       if self.erased else ""),
            "source table          rows       read   |  memframe table        added",
        ]
        left = [(k, f"{v:>10,} {self.read.get(k, 0):>10,}") for k, v in self.source_rows.items()]
        right = list(self.added.items())
        for i in range(max(len(left), len(right))):
            ls = f"{left[i][0]:<16}{left[i][1]}" if i < len(left) else " " * 37
            rs = f"{right[i][0]:<16}{right[i][1]:>10,}" if i < len(right) else ""
            lines.append(f"  {ls}   |  {rs}".rstrip())
        if self.skipped:
            lines.append("not imported (the digest does not read them):")
            for name, rows in self.skipped.items():
                lines.append(f"  {name:<24}{'?' if rows is None else format(rows, ','):>10}")
        for note in self.notes:
            lines.append(f"note: {note}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"ImportReport(mode={self.mode!r}, generation={self.generation}, "
                f"rows_written={self.rows_written}, source={self.source!r}, "
                f"store={self.store!r})")

    def _repr_html_(self) -> str:
        from memframe._render import import_html  # the leaf renderer

        tables = [("source rows", list(self.source_rows.items())),
                  ("rows read", list(self.read.items())),
                  ("memframe rows added", list(self.added.items()))]
        if self.skipped:
            tables.append(("not imported", list(self.skipped.items())))
        return import_html(title="nMEMORY import", source=str(self.source),
                           store=str(self.store), mode=self.mode, generation=self.generation,
                           rows_written=self.rows_written, seconds=self.seconds,
                           erased=self.erased, tables=tables, notes=list(self.notes))


# ---- the source --------------------------------------------------------------------------

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
            if version != SCHEMA_VERSION:
                raise ImportSourceError(
                    f"{self.path} has nMEMORY schema version {version}; this importer reads "
                    f"version {SCHEMA_VERSION} only: open it once with an nMEMORY release of "
                    f"schema {SCHEMA_VERSION} to migrate it, then import again"
                )
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

    def _check_tables(self) -> None:
        missing = [t for t in SOURCE_TABLES if t not in self.objects]
        if missing:
            raise ImportSourceError(
                f"{self.path} lacks table(s) {', '.join(missing)} of the schema v"
                f"{SCHEMA_VERSION} layout; it is damaged or not an nMEMORY store"
            )
        for table, columns in SOURCE_TABLES.items():
            have = {row[1] for row in self.con.execute(f'PRAGMA table_info("{table}")')}
            lacking = [c for c in columns if c not in have]
            if lacking:
                raise ImportSourceError(
                    f"{self.path}: table {table} lacks column(s) {', '.join(lacking)} of the "
                    f"schema v{SCHEMA_VERSION} layout"
                )

    def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        try:
            row = self.con.execute(sql, list(params)).fetchone()
        except sqlite3.Error as exc:
            raise ImportSourceError(f"cannot read {self.path}: {exc}") from None
        return None if row is None else row[0]

    def _sql(self, table: str, where: str, order: str) -> str:
        cols = ", ".join(f'"{c}"' for c in SOURCE_TABLES[table])
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
            return pl.DataFrame(schema=SOURCE_TABLES[table])
        return pl.concat(frames) if len(frames) > 1 else frames[0]

    def batches(self, table: str, where: str = "", params: Sequence[Any] = (), order: str = "",
                *, batch_rows: int | None = DEFAULT_BATCH_ROWS) -> Iterator[pl.DataFrame]:
        """A source table in batches of ``batch_rows`` rows (all at once when None)."""
        sql = self._sql(table, where, order)
        schema = SOURCE_TABLES[table]
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

    def skipped_tables(self) -> dict[str, int | None]:
        """Tables the importer does not read, with their row counts."""
        virtual = [n for n, (_k, sql) in self.objects.items()
                   if sql.upper().startswith("CREATE VIRTUAL TABLE")]
        out: dict[str, int | None] = {}
        for name in sorted(self.objects):
            if name in SOURCE_TABLES or name.startswith("sqlite_"):
                continue
            if any(name != v and name.startswith(v + "_") for v in virtual):
                continue  # a virtual table's shadow table (FTS5 data, index, ...)
            try:
                out[name] = int(self.con.execute(f'SELECT COUNT(*) FROM "{name}"').fetchone()[0])
            except sqlite3.Error:
                out[name] = None
        return out

    def identity(self) -> dict[str, str | None]:
        """What names this source whatever its path: its first capsule and audit row."""
        return {
            "capsule_1": self.scalar("SELECT source_hash FROM capsules ORDER BY seq LIMIT 1"),
            "audit_1": self.scalar("SELECT chained_hash FROM audit_events ORDER BY seq LIMIT 1"),
        }


# ---- row checks and conversions ----------------------------------------------------------

def _fail(table: str, key: str, frame: pl.DataFrame, bad: pl.Series, what: str) -> None:
    """Raise naming the first row of ``frame`` where ``bad`` holds (if any)."""
    bad = bad.fill_null(True)
    if bad.any():
        i = int(bad.arg_true()[0])
        raise ImportSourceError(f"{table} row {key}={frame[key][i]!r}: {what}")


def _times(frame: pl.DataFrame, column: str, table: str, key: str, *, nullable: bool = False,
           exact: bool = False, notes: _Notes | None = None) -> pl.Series:
    """Parse an RFC3339 TEXT column to Datetime(ns, UTC), refusing what does not parse.

    ``exact`` also refuses text that memframe would not render back byte for byte
    (``Z`` offset, trimmed fractional zeros); otherwise such text is normalised and
    counted in ``notes``.
    """
    text = frame[column]
    if text.dtype != pl.String:
        text = text.cast(pl.String)
    present = text.is_not_null()
    if not nullable:
        _fail(table, key, frame, ~present, f"{column} is NULL")
    # the text memframe renders back byte for byte: 'Z', no trailing fractional zero
    canonical = text.str.contains(_CANONICAL)
    parsed = text.str.to_datetime(format=_TIME_FORMAT, time_unit="ns", time_zone="UTC",
                                  strict=False)
    bad = present & parsed.is_null()
    # nanoseconds wrap outside 1677..2262: check the range on a parse that cannot wrap
    wide = text.str.to_datetime(format=_TIME_FORMAT, time_unit="us", time_zone="UTC",
                                strict=False)
    out = ~wide.is_between(INSTANT_MIN, INSTANT_MAX).fill_null(True)
    _fail(table, key, frame, out, f"{column} {_first(text, out)!r} is outside the instants a "
                                  f"memframe store can hold (1677-09-21..2262-04-11, nanosecond "
                                  f"precision)")
    if bool(canonical.all()):  # the usual case: one regex pass, one parse
        _fail(table, key, frame, bad, f"{column} {_first(text, bad)!r} is not an RFC3339 "
                                      f"timestamp")
        return parsed
    shape = text.str.contains(_RFC3339).fill_null(False)
    bad = present & (~shape | parsed.is_null())
    _fail(table, key, frame, bad, f"{column} {_first(text, bad)!r} is not an RFC3339 timestamp")
    differs = present & ~canonical.fill_null(True)
    if differs.any():
        i = int(differs.arg_true()[0])
        rendered = pl.select(rfc3339(pl.lit(parsed[i:i + 1]))).item()
        if exact:
            raise ImportSourceError(
                f"{table} row {key}={frame[key][i]!r}: {column} {text[i]!r} would be re-rendered "
                f"as {rendered!r} (memframe keeps UTC instants and renders them with 'Z' and "
                f"trimmed fractional zeros), so the hash chain would no longer verify; refusing "
                f"to import a journal that memframe cannot reproduce byte for byte"
            )
        if notes is not None:
            notes.add(f"{table}.{column}: {int(differs.sum())} timestamp(s) not in canonical "
                      f"UTC 'Z' form were normalised (same instants)")
    return parsed


def _first(series: pl.Series, mask: pl.Series) -> Any:
    mask = mask.fill_null(True)
    return series[int(mask.arg_true()[0])] if mask.any() else None


def _vocab(frame: pl.DataFrame, column: str, allowed: Sequence[str], table: str, key: str,
           what: str) -> None:
    bad = ~frame[column].is_in(list(allowed))
    _fail(table, key, frame, bad, f"unknown {what} {_first(frame[column], bad)!r}; "
                                  f"allowed: {', '.join(allowed)}")


class _Notes:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, note: str) -> None:
        if note not in self.items:
            self.items.append(note)


def _locate_bad_json(raw: pl.DataFrame) -> ImportSourceError:
    """The first canonical_json row Polars could not decode, found row by row (error path)."""
    kinds = {"content": str, "confidence": (int, float), "authority_class": str,
             "instruction_taint": bool, "provenance": dict, "freshness": dict, "scope": dict}
    for seq, cid, text in raw.select("seq", "id", "canonical_json").iter_rows():
        if text is None:
            continue
        try:
            value = json.loads(text)
        except ValueError as exc:
            return ImportSourceError(f"capsules row seq={seq} ({cid}): canonical_json is not "
                                     f"valid JSON ({exc}); the source is corrupt")
        if not isinstance(value, dict):
            return ImportSourceError(f"capsules row seq={seq} ({cid}): canonical_json is not a "
                                     f"Capsule v1 object")
        for name, kind in kinds.items():
            if name in value and value[name] is not None and not isinstance(value[name], kind):
                return ImportSourceError(
                    f"capsules row seq={seq} ({cid}): canonical_json field {name!r} has the "
                    f"wrong type ({type(value[name]).__name__}); the source is corrupt"
                )
        for outer in ("provenance", "freshness", "scope"):
            for name, inner in (value.get(outer) or {}).items():
                if inner is not None and not isinstance(inner, str):
                    return ImportSourceError(
                        f"capsules row seq={seq} ({cid}): canonical_json field "
                        f"{outer}.{name} is not a string; the source is corrupt"
                    )
    return ImportSourceError("capsules: a canonical_json row could not be decoded as Capsule v1")


def _capsule_rows(raw: pl.DataFrame, tombs: pl.DataFrame, first: int,
                  notes: _Notes) -> pl.DataFrame:
    """Source capsule rows (a batch, seq order) -> memframe capsule rows.

    ``tombs`` holds the tombstones of the capsules in ``raw`` (capsule_id,
    provenance_source, provenance_anchor); ``first`` is the seq the batch must start at.
    """
    t = "capsules"
    n = raw.height
    expected = pl.int_range(first, first + n, dtype=pl.Int64, eager=True)
    _fail(t, "seq", raw, raw["seq"] != expected,
          f"capsule seqs must run 1, 2, 3, ... without gaps (expected {first} .. here); "
          f"memframe's capsule ids are dense")
    _fail(t, "seq", raw, raw["id"] != ("cap-" + raw["seq"].cast(pl.String)),
          "id is not cap-<seq>")
    try:
        decoded = raw["canonical_json"].str.json_decode(_CAPSULE_V1)
    except pl.exceptions.PolarsError:
        raise _locate_bad_json(raw) from None
    f = raw.with_columns(decoded.alias("j")).join(
        tombs.select(pl.col("capsule_id").alias("id"), "provenance_source", "provenance_anchor",
                     pl.lit(True).alias("tombstoned")),
        on="id", how="left", maintain_order="left",
    )
    j = pl.col("j")
    live = j.is_not_null()
    f = f.with_columns(
        live.alias("live"),
        pl.col("tombstoned").fill_null(False),
        j.struct.field("content").alias("content"),
        j.struct.field("provenance").struct.field("source").alias("j_source"),
        j.struct.field("provenance").struct.field("anchor").alias("j_anchor"),
        j.struct.field("provenance").struct.field("source_hash").alias("j_hash"),
        j.struct.field("confidence").alias("confidence"),
        j.struct.field("freshness").struct.field("valid_from").alias("j_valid_from"),
        j.struct.field("freshness").struct.field("valid_to").alias("j_valid_to"),
        j.struct.field("scope").struct.field("project_id").alias("j_project"),
        j.struct.field("authority_class").alias("j_authority"),
        j.struct.field("instruction_taint").alias("j_taint"),
    )
    lv, dead = f["live"], ~f["live"]
    _fail(t, "id", f, dead & ~f["tombstoned"],
          "canonical_json is NULL (tombstoned) but there is no tombstones row for it")
    _fail(t, "id", f, lv & f["tombstoned"],
          "has a tombstones row but its canonical_json is still present")
    for col, what in (("content", "content"), ("j_source", "provenance.source"),
                      ("j_anchor", "provenance.anchor"), ("j_hash", "provenance.source_hash"),
                      ("j_project", "scope.project_id"), ("j_authority", "authority_class"),
                      ("j_taint", "instruction_taint"), ("confidence", "confidence"),
                      ("j_valid_from", "freshness.valid_from")):
        _fail(t, "id", f, lv & f[col].is_null(),
              f"canonical_json lacks {what}; it is not a valid Capsule v1")
    for col, what in (("content", "content"), ("j_source", "provenance.source"),
                      ("j_anchor", "provenance.anchor"), ("j_project", "scope.project_id")):
        _fail(t, "id", f, lv & (f[col].str.strip_chars() == ""),
              f"canonical_json has a blank {what}; Capsule v1 forbids it")
    _fail(t, "id", f, f["project_id"].is_null() | (f["project_id"].str.strip_chars() == ""),
          "project_id is NULL or blank")
    _fail(t, "id", f, lv & (f["j_project"] != f["project_id"]),
          "project_id column differs from canonical_json scope.project_id; the source is corrupt")
    _fail(t, "id", f, lv & (f["j_hash"] != f["source_hash"]),
          "source_hash column differs from canonical_json provenance.source_hash")
    _fail(t, "id", f, lv & (f["j_authority"] != f["authority_class"]),
          "authority_class column differs from canonical_json authority_class")
    _fail(t, "id", f, ~f["source_hash"].str.contains(_HEX64).fill_null(False),
          "source_hash is not 64 lowercase hex digits")
    _vocab(f, "authority_class", S.AUTHORITY_CLASSES, t, "id", "authority_class")
    _fail(t, "id", f, lv & ~f["confidence"].is_between(0.0, 1.0),
          "confidence is outside 0..1")
    created = _times(f, "created_at", t, "id", notes=notes)
    col_from = _times(f, "valid_from", t, "id", nullable=True, notes=notes)
    other = lv & (f["j_valid_from"] != f["valid_from"]).fill_null(True)
    if other.any():  # texts differ: compare the instants (only those rows are parsed)
        g = f.filter(other)
        j_from = _times(g, "j_valid_from", t, "id", notes=notes)
        _fail(t, "id", g, (j_from != col_from.filter(other)).fill_null(True),
              "valid_from column differs from canonical_json freshness.valid_from")
    valid_to = _times(f, "j_valid_to", t, "id", nullable=True, notes=notes)
    valid_from = col_from.fill_null(created)
    _fail(t, "id", f, (valid_to < valid_from).fill_null(False), "valid_to is before valid_from")
    out = f.select(
        pl.col("id"),
        created.alias("created_at"),
        pl.col("project_id"),
        pl.col("content"),
        pl.col("content").str.len_chars().cast(pl.Int64).fill_null(0).alias("content_chars"),
        pl.when(pl.col("live")).then(pl.col("j_source"))
        .otherwise(pl.coalesce(pl.col("provenance_source").replace("", None),
                               pl.lit(TOMBSTONE_SOURCE))).alias("source"),
        pl.when(pl.col("live")).then(pl.col("j_anchor"))
        .otherwise(pl.coalesce(pl.col("provenance_anchor").replace("", None), pl.col("id")))
        .alias("anchor"),
        pl.col("source_hash"),
        pl.col("confidence").fill_null(capture.DEFAULT_CONFIDENCE).cast(pl.Float64),
        valid_from.alias("valid_from"),
        valid_to.alias("valid_to"),
        pl.col("authority_class"),
        pl.col("j_taint").fill_null(False).alias("instruction_taint"),
        pl.col("session_id").alias("conversation_id"),
        pl.lit(None, dtype=pl.String).alias("author"),
    )
    return out


def _forget_rows(tombs: pl.DataFrame, notes: _Notes) -> pl.DataFrame:
    t = "tombstones"
    _vocab(tombs, "mode", tuple(_FORGET_MODES), t, "capsule_id", "tombstone mode")
    at = _times(tombs, "at", t, "capsule_id", notes=notes)
    return tombs.select(
        at.alias("at"),
        pl.col("capsule_id"),
        pl.col("mode").replace_strict(_FORGET_MODES, return_dtype=pl.String),
        pl.col("reason"),
    ).sort("at", pl.col("capsule_id").str.slice(4).cast(pl.Int64, strict=False), "capsule_id")


def _relation_rows(rel: pl.DataFrame, notes: _Notes) -> pl.DataFrame:
    t, k = "relations", "from_id"
    _vocab(rel, "kind", S.RELATION_KINDS, t, k, "relation kind")
    rel = rel.with_columns(pl.col("origin").fill_null("manual"))
    _vocab(rel, "origin", S.RELATION_ORIGINS, t, k, "relation origin")
    _fail(t, k, rel, rel["from_id"].is_null() | rel["to_id"].is_null(), "an endpoint is NULL")
    at = _times(rel, "at", t, k, notes=notes)
    return rel.select(at.alias("at"), "kind", "from_id", "to_id", "origin")


def _recall_rows(usage: pl.DataFrame, notes: _Notes) -> pl.DataFrame:
    t, k = "usage", "capsule_id"
    _fail(t, k, usage, usage["recall_count"].is_null() | (usage["recall_count"] < 0),
          "recall_count is NULL or negative")
    at = _times(usage, "last_recalled_at", t, k, notes=notes)
    zero = int((usage["recall_count"] == 0).sum())
    if zero:
        notes.add(f"usage: {zero} row(s) with recall_count 0 were left out (a recall event "
                  f"counts at least 1; the fold's count and time are unchanged)")
    return (usage.select(at.alias("at"), pl.col("capsule_id"),
                         pl.col("recall_count").alias("count"))
            .filter(pl.col("count") > 0)
            .sort("at", pl.col("capsule_id").str.slice(4).cast(pl.Int64, strict=False)))


def _classification_rows(cls: pl.DataFrame, notes: _Notes) -> pl.DataFrame:
    t, k = "classifications", "capsule_id"
    _vocab(cls, "kind", S.CLASSIFICATION_KINDS, t, k, "kind")
    _vocab(cls, "scope", S.CLASSIFICATION_SCOPES, t, k, "scope")
    at = _times(cls, "at", t, k, notes=notes)
    return cls.select(at.alias("at"), "capsule_id", "kind", "scope").sort("at", "capsule_id")


def _tier_rows(tiers: pl.DataFrame, notes: _Notes) -> pl.DataFrame:
    t, k = "tiers", "capsule_id"
    _vocab(tiers, "tier", S.TIERS, t, k, "tier")
    at = _times(tiers, "at", t, k, notes=notes)
    return tiers.select(at.alias("at"), "capsule_id", "tier").sort("at", "capsule_id")


def _cursor_rows(cursors: pl.DataFrame, notes: _Notes) -> pl.DataFrame:
    t, k = "source_cursors", "source_key"
    _fail(t, k, cursors, cursors["cursor"].is_null(), "cursor is NULL")
    at = _times(cursors, "at", t, k, notes=notes)
    return cursors.select(at.alias("at"), "source_key", "cursor").sort("source_key")


def _session_number(ids: pl.Series) -> pl.Series:
    return ids.str.strip_prefix("sess-").cast(pl.Int64, strict=False)


def _sessions(sessions: pl.DataFrame, notes: _Notes) -> pl.DataFrame:
    """Checked source sessions with parsed instants (session_id, start, finish, summary)."""
    t, k = "sessions", "session_id"
    num = _session_number(sessions["session_id"])
    _fail(t, k, sessions, num.is_null() | (num < 1) | ~sessions["session_id"].str.starts_with(
        "sess-"), "session ids must look like sess-<n>")
    start = _times(sessions, "started_at", t, k, notes=notes)
    finish = _times(sessions, "finished_at", t, k, nullable=True, notes=notes)
    return sessions.select("session_id", start.alias("start"), finish.alias("finish"), "summary")


def _bracket_rows(sessions: pl.DataFrame, projects: Mapping[str, str],
                  which: str = "both") -> pl.DataFrame:
    """Start and/or finish bracket rows of parsed sessions.

    A finished session's summary goes on its finish row, an open one's on its start row.
    """
    project = pl.col("session_id").replace_strict(
        dict(projects), default=capture.DEFAULT_PROJECT, return_dtype=pl.String)
    frames = []
    if which in ("both", "start"):
        frames.append(sessions.select(
            pl.col("start").alias("at"), "session_id", pl.lit("start").alias("event"),
            project.alias("project_id"),
            pl.when(pl.col("finish").is_null()).then(pl.col("summary")).alias("summary"),
        ))
    if which in ("both", "finish"):
        frames.append(sessions.filter(pl.col("finish").is_not_null()).select(
            pl.col("finish").alias("at"), "session_id", pl.lit("finish").alias("event"),
            project.alias("project_id"), pl.col("summary"),
        ))
    out = pl.concat(frames) if frames else S.empty_frame("brackets").drop("seq")
    return out.sort("at", _session_number(out["session_id"]), pl.col("event").eq("finish"))


def _journal_rows(audit: pl.DataFrame) -> pl.DataFrame:
    t, k = "audit_events", "seq"
    for col in ("actor", "action", "subject", "chained_hash"):
        _fail(t, k, audit, audit[col].is_null(), f"{col} is NULL")
    _fail(t, k, audit, audit["seq"] < 1, "seq is not positive")
    at = _times(audit, "at", t, k, exact=True)
    return audit.select(pl.col("seq").alias("audit_seq"), at.alias("at"), "actor", "action",
                        "subject", "reason", "chained_hash")


def _miss_rows(misses: pl.DataFrame, notes: _Notes) -> pl.DataFrame:
    t, k = "recall_misses", "seq"
    _fail(t, k, misses, misses["term"].is_null() | (misses["term"] == ""), "term is empty")
    _vocab(misses, "outcome", S.MISS_OUTCOMES, t, k, "miss outcome")
    at = _times(misses, "at", t, k, notes=notes)
    return misses.select(at.alias("at"), "term", "outcome")


def _override_rows(rows: pl.DataFrame, notes: _Notes) -> pl.DataFrame:
    t, k = "lane_overrides", "seq"
    _fail(t, k, rows, rows["forced"].is_null() | rows["auto_pick"].is_null(), "a lane is NULL")
    at = _times(rows, "at", t, k, notes=notes)
    return rows.select(at.alias("at"), "forced", "auto_pick")


def _corroboration_rows(rows: pl.DataFrame, notes: _Notes) -> pl.DataFrame:
    t, k = "corroborations", "seq"
    _vocab(rows, "source", S.CORROBORATION_SOURCES, t, k, "source")
    _vocab(rows, "kind", S.CORROBORATION_KINDS, t, k, "corroboration kind")
    _vocab(rows, "verdict", S.CORROBORATION_VERDICTS, t, k, "verdict")
    _fail(t, k, rows, rows["capsule_id"].is_null() | rows["ref"].is_null(),
          "capsule_id or ref is NULL")
    at = _times(rows, "at", t, k, notes=notes)
    return rows.select(at.alias("at"), "capsule_id", "source", "kind", "ref", "verdict", "detail")


def _review_rows(rows: pl.DataFrame, notes: _Notes) -> pl.DataFrame:
    t, k = "review_events", "seq"
    _vocab(rows, "verdict", S.REVIEW_VERDICTS, t, k, "review verdict")
    _fail(t, k, rows, rows["capsule_id"].is_null() | rows["actor"].is_null(),
          "capsule_id or actor is NULL")
    at = _times(rows, "at", t, k, notes=notes)
    return rows.select(at.alias("at"), "capsule_id", "verdict", "reason", "actor")


def _pin_rows(rows: pl.DataFrame, notes: _Notes) -> pl.DataFrame:
    t, k = "pin_events", "seq"
    _fail(t, k, rows, ~rows["pinned"].is_in([0, 1]).fill_null(False), "pinned is not 0 or 1")
    _fail(t, k, rows, rows["capsule_id"].is_null() | rows["actor"].is_null(),
          "capsule_id or actor is NULL")
    at = _times(rows, "at", t, k, notes=notes)
    return rows.select(at.alias("at"), "capsule_id", (pl.col("pinned") == 1).alias("pinned"),
                       "reason", "actor")


_SEQ_ROWS: dict[str, tuple[str, Callable[[pl.DataFrame, _Notes], pl.DataFrame]]] = {
    "recall_misses": ("recall_misses", _miss_rows),
    "lane_overrides": ("lane_overrides", _override_rows),
    "corroborations": ("corroborations", _corroboration_rows),
    "review_events": ("reviews", _review_rows),
    "pin_events": ("pins", _pin_rows),
}
#: seq tables whose rows name a capsule of the source (checked against the capsule count)
_CAPSULE_TABLES = ("review_events", "pin_events")


def _check_capsule_refs(table: str, rows: pl.DataFrame, capsules: int) -> None:
    """Refuse rows naming no capsule of the source (ids run cap-1..cap-<capsules>)."""
    num = rows["capsule_id"].str.strip_prefix("cap-").cast(pl.Int64, strict=False)
    _fail(table, "seq", rows,
          num.is_null() | (num < 1) | (num > capsules)
          | ~rows["capsule_id"].str.starts_with("cap-")
          | rows["capsule_id"].str.strip_prefix("cap-").str.starts_with("0"),
          f"capsule_id names no capsule of the source (capsules run cap-1..cap-{capsules})")


def _session_projects(src: _Source, ids: Sequence[str] | None) -> dict[str, str]:
    """The project of each session: that of its first capsule (by seq), if it has one.

    nMEMORY's sessions table holds no project; memframe's bracket rows carry one.
    """
    sql = ("SELECT c.session_id, c.project_id FROM capsules c JOIN (SELECT session_id, "
           "MIN(seq) AS s FROM capsules WHERE session_id IS NOT NULL{flt} GROUP BY session_id) m "
           "ON c.seq = m.s")
    out: dict[str, str] = {}
    try:
        if ids is None:
            out.update(src.con.execute(sql.format(flt="")).fetchall())
        else:
            ids = list(ids)
            for i in range(0, len(ids), _IN_CHUNK):
                chunk = ids[i:i + _IN_CHUNK]
                flt = f" AND session_id IN ({', '.join('?' * len(chunk))})"
                out.update(src.con.execute(sql.format(flt=flt), chunk).fetchall())
    except sqlite3.Error as exc:
        raise ImportSourceError(f"cannot read capsules of {src.path}: {exc}") from None
    return {k: v for k, v in out.items() if v}


# ---- planning ----------------------------------------------------------------------------

@dataclasses.dataclass
class _Plan:
    base_generation: int
    appends: list[tuple[str, pl.DataFrame, str]] = dataclasses.field(default_factory=list)
    journal: pl.DataFrame | None = None
    erase: dict[str, str] = dataclasses.field(default_factory=dict)  # capsule id -> mode
    capsules: int = 0
    sessions: int = 0
    watermark: dict[str, Any] = dataclasses.field(default_factory=dict)

    def add(self, table: str, frame: pl.DataFrame, source: str) -> None:
        if frame.height:
            self.appends.append((table, frame, source))

    @property
    def empty(self) -> bool:
        return not self.appends and (self.journal is None or self.journal.height == 0)

    def added(self) -> dict[str, int]:
        out = dict.fromkeys(S.CANONICAL_TABLES, 0)
        for table, frame, _ in self.appends:
            out[table] += frame.height
        if self.journal is not None:
            out["journal"] += self.journal.height
        return {k: v for k, v in out.items() if v}


class _Progress:
    def __init__(self, enabled: bool | None, total: int, desc: str):
        if enabled is None:
            enabled = bool(getattr(sys.stderr, "isatty", lambda: False)())
        self.bar = None
        if enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, unit="rows", unit_scale=True, desc=desc,
                            file=sys.stderr, leave=False)

    def update(self, n: int) -> None:
        if self.bar is not None:
            self.bar.update(n)

    def stage(self, text: str) -> None:
        if self.bar is not None:
            self.bar.set_description(text)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _seq_marks(src: _Source) -> dict[str, dict[str, Any]]:
    """For each append-only table: highest seq, row count, fingerprint of the last row."""
    marks: dict[str, dict[str, Any]] = {}
    for table in _SEQ_TABLES:
        top = src.scalar(f'SELECT MAX(seq) FROM "{table}"')
        top = int(top) if top is not None else 0
        marks[table] = {"seq": top, "rows": src.count(table),
                        "tail": src.tail(table, top) if top else None}
    return marks


def _read_capsules(src: _Source, after: int, tombs: pl.DataFrame, notes: _Notes,
                   progress: _Progress, batch_rows: int) -> list[pl.DataFrame]:
    frames: list[pl.DataFrame] = []
    first = after + 1
    for raw in src.batches("capsules", "seq > ?", [after], "seq", batch_rows=batch_rows):
        if raw.height == 0:
            continue
        frames.append(_capsule_rows(raw, tombs, first, notes))
        first += raw.height
        progress.update(raw.height)
    return frames


def _read_journal(src: _Source, after: int, progress: _Progress,
                  batch_rows: int) -> pl.DataFrame | None:
    frames = []
    for batch in src.batches("audit_events", "seq > ?", [after], "seq", batch_rows=batch_rows):
        frames.append(_journal_rows(batch))
        progress.update(batch.height)
    return pl.concat(frames) if frames else None


def _full_plan(src: _Source, base_generation: int, notes: _Notes, progress: _Progress,
               batch_rows: int) -> _Plan:
    plan = _Plan(base_generation)
    tombs = src.read("tombstones")
    progress.update(tombs.height)
    caps = _read_capsules(src, 0, tombs, notes, progress, batch_rows)
    for frame in caps:
        plan.add("capsules", frame, "capsules")
    plan.capsules = sum(f.height for f in caps)
    _check_tombstone_targets(tombs, plan.capsules)
    plan.add("forgets", _forget_rows(tombs, notes), "tombstones")
    _one_to_one(src, plan, notes, progress)
    sessions = _sessions(src.read("sessions"), notes)
    progress.update(sessions.height)
    plan.add("brackets", _bracket_rows(sessions, _session_projects(src, None)), "sessions")
    plan.sessions = int(_session_number(sessions["session_id"]).max() or 0)
    plan.journal = _read_journal(src, 0, progress, batch_rows)
    for table, (target, convert) in _SEQ_ROWS.items():
        rows = src.read(table, order="seq")
        progress.update(rows.height)
        if table in _CAPSULE_TABLES:
            _check_capsule_refs(table, rows, plan.capsules)
        plan.add(target, convert(rows, notes), table)
    return plan


def _one_to_one(src: _Source, plan: _Plan, notes: _Notes, progress: _Progress) -> None:
    """The mutable side tables of a first import: relations, usage, labels, tiers, cursors."""
    for table, target, convert, order in (
        ("relations", "relations", _relation_rows, "at, kind, from_id, to_id"),
        ("usage", "recalls", _recall_rows, ""),
        ("classifications", "classifications", _classification_rows, ""),
        ("tiers", "tiers", _tier_rows, ""),
        ("source_cursors", "source_cursors", _cursor_rows, "source_key"),
    ):
        rows = src.read(table, order=order)
        progress.update(rows.height)
        plan.add(target, convert(rows, notes), table)


def _check_tombstone_targets(tombs: pl.DataFrame, capsules: int) -> None:
    num = tombs.select(capsule_number_expr("capsule_id")).to_series()
    _fail("tombstones", "capsule_id", tombs,
          num.is_null() | (num > capsules), f"names no capsule of the source (capsules run cap-1..cap-{capsules})")


def _refuse(what: str) -> SourceRewrittenError:
    return SourceRewrittenError(
        f"the source changed in a way that is not an append since the last import: {what}. "
        f"An incremental import only adds; import the file into a new store instead"
    )


def _incremental_plan(src: _Source, view: StoreView, mark: Mapping[str, Any], notes: _Notes,
                      progress: _Progress, batch_rows: int) -> _Plan:
    plan = _Plan(view.generation)
    old = mark["tables"]
    # append-only tables: the rows up to the watermark must be exactly what was imported
    for table in _SEQ_TABLES:
        seen = old.get(table, _NO_MARK)
        seq, rows, tail = seen["seq"], seen["rows"], seen["tail"]
        if src.count(table, "seq <= ?", [seq]) != rows:
            raise _refuse(f"{table} no longer holds the {rows} row(s) up to seq {seq} it had")
        if seq and src.tail(table, seq) != tail:
            raise _refuse(f"{table} row seq {seq} (the last one imported) was rewritten")
    n_old = int(old["capsules"]["seq"])
    tombs = src.read("tombstones")
    progress.update(tombs.height)
    caps = _read_capsules(src, n_old, tombs, notes, progress, batch_rows)
    for frame in caps:
        plan.add("capsules", frame, "capsules")
    plan.capsules = n_old + sum(f.height for f in caps)
    _check_tombstone_targets(tombs, plan.capsules)
    # tombstones: the imported ones unchanged, new ones appended (old capsules erased)
    forgets = _forget_rows(tombs, notes)
    stored = view.table("forgets").select("capsule_id", "mode", "at", "reason").collect()
    both = stored.join(forgets, on="capsule_id", how="left", suffix="_src")
    gone = both.filter(pl.col("mode_src").is_null())
    if gone.height:
        raise _refuse(f"the tombstone of {gone['capsule_id'][0]} disappeared")
    changed = both.filter((pl.col("mode") != pl.col("mode_src")) | (pl.col("at") != pl.col(
        "at_src")) | pl.col("reason").ne_missing(pl.col("reason_src")))
    if changed.height:
        raise _refuse(f"the tombstone of {changed['capsule_id'][0]} was rewritten")
    fresh = forgets.join(stored.select("capsule_id"), on="capsule_id", how="anti")
    plan.add("forgets", fresh, "tombstones")
    older = fresh.filter(pl.col("capsule_id").str.slice(4).cast(pl.Int64) <= n_old)
    if older.height:
        ids = older["capsule_id"].to_list()
        for i in range(0, len(ids), _IN_CHUNK):
            chunk = ids[i:i + _IN_CHUNK]
            still = src.scalar(f"SELECT id FROM capsules WHERE canonical_json IS NOT NULL AND "
                               f"id IN ({', '.join('?' * len(chunk))}) LIMIT 1", chunk)
            if still is not None:
                raise ImportSourceError(f"tombstones names {still} but its canonical_json is "
                                        f"still present; the source is inconsistent")
        plan.erase = dict(older.select("capsule_id", "mode").iter_rows())
    _incremental_side_tables(src, view, plan, notes, progress)
    # journal and the other append-only tables: rows past the watermark
    audit = old["audit_events"]["seq"]
    plan.journal = _read_journal(src, audit, progress, batch_rows)
    for table, (target, convert) in _SEQ_ROWS.items():
        rows = src.read(table, "seq > ?", [old.get(table, _NO_MARK)["seq"]], order="seq")
        progress.update(rows.height)
        if table in _CAPSULE_TABLES:
            _check_capsule_refs(table, rows, plan.capsules)
        plan.add(target, convert(rows, notes), table)
    return plan


def _incremental_side_tables(src: _Source, view: StoreView, plan: _Plan, notes: _Notes,
                             progress: _Progress) -> None:
    """Diff nMEMORY's mutable side tables against the store's folds; append the changes."""
    now = view.now()
    # relations: (kind, from, to) is the key; imported edges must be unchanged
    rel = _relation_rows(src.read("relations", order="at, kind, from_id, to_id"), notes)
    progress.update(rel.height)
    key = ["kind", "from_id", "to_id"]
    stored = view.table("relations").select("at", *key, "origin").collect()
    lost = stored.join(rel, on=key, how="anti")
    if lost.height:
        r = lost.row(0, named=True)
        raise _refuse(f"relation {r['kind']} {r['from_id']} -> {r['to_id']} disappeared")
    moved = stored.join(rel, on=key, suffix="_src").filter(
        (pl.col("at") != pl.col("at_src")) | (pl.col("origin") != pl.col("origin_src")))
    if moved.height:
        r = moved.row(0, named=True)
        raise _refuse(f"relation {r['kind']} {r['from_id']} -> {r['to_id']} was rewritten")
    plan.add("relations", rel.join(stored.select(key), on=key, how="anti", maintain_order="left"),
             "relations")
    # usage: counts only grow; the delta becomes a new recall row at the new last instant
    usage = _recall_rows(src.read("usage"), notes)
    progress.update(usage.height)
    folded = (view.table("recalls").group_by("capsule_id")
              .agg(pl.col("count").sum().alias("old"), pl.col("at").max().alias("old_at"))
              .collect())
    j = folded.join(usage, on="capsule_id", how="full", coalesce=True)
    bad = j.filter(pl.col("old").is_not_null() & (
        pl.col("count").is_null() | (pl.col("count") < pl.col("old"))
        | ((pl.col("count") == pl.col("old")) & (pl.col("at") != pl.col("old_at")))
        | ((pl.col("count") > pl.col("old")) & (pl.col("at") < pl.col("old_at")))))
    if bad.height:
        raise _refuse(f"the usage row of {bad['capsule_id'][0]} went backwards (recall "
                      f"counts only grow and the last recall only moves forward)")
    delta = (j.filter(pl.col("count") > pl.col("old").fill_null(0))
             .select("at", "capsule_id", (pl.col("count") - pl.col("old").fill_null(0))
                     .alias("count"))
             .sort("at", pl.col("capsule_id").str.slice(4).cast(pl.Int64, strict=False)))
    plan.add("recalls", delta, "usage")
    # classifications / tiers / cursors: latest-by-seq labels; changes are new rows
    for table, convert, keys, values, removable in (
        ("classifications", _classification_rows, ["capsule_id"], ["kind", "scope", "at"], None),
        ("tiers", _tier_rows, ["capsule_id"], ["tier", "at"], {"tier": "active"}),
        ("source_cursors", _cursor_rows, ["source_key"], ["cursor", "at"], None),
    ):
        new = convert(src.read(table), notes)
        progress.update(new.height)
        cur = latest_by_seq(view.table(table), *keys).select(*keys, *values).collect()
        gone = cur.join(new, on=keys, how="anti")
        if gone.height and removable is None:
            raise _refuse(f"the {table} row of {gone[keys[0]][0]} disappeared")
        if gone.height:  # a tier row removed means the capsule is active again
            gone = gone.filter(pl.col("tier") != "active").select(
                pl.lit(now).cast(S.TIMESTAMP).alias("at"), *keys,
                *[pl.lit(v).alias(k) for k, v in removable.items()])
        diff = new.join(cur, on=keys, how="left", suffix="_old").filter(
            pl.any_horizontal([pl.col(v).ne_missing(pl.col(f"{v}_old")) for v in values]))
        rows = diff.select(new.columns)
        if gone.height:
            rows = pl.concat([rows, gone.select(new.columns)])
        plan.add(table, rows, table)
    # sessions: new ones start (and maybe finish); open ones may finish
    sessions = _sessions(src.read("sessions"), notes)
    progress.update(sessions.height)
    brackets = view.table("brackets").select("session_id", "event", "at").collect()
    starts = brackets.filter(pl.col("event") == "start").select(
        "session_id", pl.col("at").alias("old_start"))
    finishes = brackets.filter(pl.col("event") == "finish").select(
        "session_id", pl.col("at").alias("old_finish"))
    j = starts.join(finishes, on="session_id", how="left").join(
        sessions, on="session_id", how="full", coalesce=True)
    bad = j.filter(pl.col("old_start").is_not_null() & (
        pl.col("start").is_null() | (pl.col("start") != pl.col("old_start"))
        | (pl.col("old_finish").is_not_null() & pl.col("finish").ne_missing(
            pl.col("old_finish")))))
    if bad.height:
        raise _refuse(f"session {bad['session_id'][0]} was removed or its start/finish rewritten")
    new_sessions = sessions.join(starts, on="session_id", how="anti")
    finishing = j.filter(pl.col("old_start").is_not_null() & pl.col("old_finish").is_null()
                         & pl.col("finish").is_not_null()).select(sessions.columns)
    need = sorted(set(new_sessions["session_id"]) | set(finishing["session_id"]))
    projects = _session_projects(src, need) if need else {}
    if finishing.height:  # keep the project the start row was imported with
        kept = (view.table("brackets").filter(pl.col("event") == "start")
                .filter(pl.col("session_id").is_in(finishing["session_id"].to_list()))
                .select("session_id", "project_id").collect())
        projects.update(dict(kept.iter_rows()))
    rows = [_bracket_rows(new_sessions, projects), _bracket_rows(finishing, projects, "finish")]
    plan.add("brackets", pl.concat(rows).sort(
        "at", _session_number(pl.concat(rows)["session_id"]),
        pl.col("event").eq("finish")), "sessions")
    plan.sessions = int(_session_number(sessions["session_id"]).max() or 0)


# ---- the target and the commit -----------------------------------------------------------

def _target(path: Path, clock: Any) -> tuple[Store | None, bool]:
    """(an existing store, or None when one must be created; whether ``path`` existed)."""
    if not path.exists():
        return None, False
    if path.is_dir() and not any(path.iterdir()):
        return None, True
    if path.is_dir() and (path / MARKER).is_file():
        return Store.open(path, clock=clock), True
    raise ImportSourceError(
        f"{path} already holds something that is not a memframe store; import into a new "
        f"path or into a store an earlier nMEMORY import created"
    )


def _append(c: capture.Commit, table: str, frame: pl.DataFrame, source: str) -> None:
    try:
        c.append(table, frame.select([n for n in S.table_schema(table).names() if n != "seq"]))
    except SchemaValidationError as exc:
        raise ImportSourceError(f"source table {source} cannot be stored as memframe {table}: "
                                f"{exc}") from None


def _apply(plan: _Plan) -> Callable[[capture.Commit], None]:
    def run(c: capture.Commit) -> None:
        if c.snapshot.generation != plan.base_generation:
            raise ImportSourceError(
                "another writer committed to the store while the import was reading; "
                "nothing was written: run the import again"
            )
        for table, frame, source in plan.appends:
            _append(c, table, frame, source)
        if plan.journal is not None and plan.journal.height:
            try:
                c.append_journal(plan.journal)
            except (SchemaValidationError, MemframeError) as exc:
                raise ImportSourceError(f"source table audit_events cannot be stored as the "
                                        f"memframe journal: {exc}") from None
        for cid, mode in plan.erase.items():
            c.erase(cid, mode)
        c.reserve_ids(capsules=plan.capsules, sessions=plan.sessions)
        c.set_watermark(WATERMARK, {**plan.watermark, "store_seq": c.seq})

    return run


def import_nmemory(
    sqlite_path: str | Path,
    store_path: str | Path,
    *,
    progress: bool | None = None,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    clock: Callable[[], Any] | None = None,
) -> ImportReport:
    """Import an nMEMORY store (its SQLite file, schema v20) into a memframe store.

    The source is opened read-only and read in one consistent snapshot; it is never
    written. A ``store_path`` that does not exist (or is an empty directory) gets a new
    store filled with everything the digest reads; a store an earlier import of the same
    source filled gets only what changed since (new capsules, edges, usage deltas,
    tombstones with content erasure, labels, tiers, brackets and journal rows). Either way
    the import is one commit, and adds no journal rows of its own: the source's audit
    chain is copied with its seqs and hashes, so it verifies with memframe's verifier.

    A tombstoned source capsule keeps no text, so its row gets ``content`` NULL,
    ``content_chars`` 0, the tombstone's provenance source (or ``"nmemory-tombstone"``)
    and anchor (or its own id), confidence 0.6, no ``valid_to`` and no taint. A capsule
    tombstoned after an earlier import keeps the metadata that import saw; its content is
    erased from the data files. ``review_events`` and ``pin_events`` become ``reviews`` and
    ``pins`` rows (so the digest's staged and pinned sections equal the engine's); every
    table the digest does not read is not imported, and the report lists those with row
    counts.

    Args:
        sqlite_path: the nMEMORY SQLite file.
        store_path: the memframe store to create or to bring up to date.
        progress: show a progress bar on stderr; None (default) shows one only when
            stderr is a terminal.
        batch_rows: rows read from SQLite per batch for the big tables.
        clock: the store's clock (``() -> aware datetime``), for a new store's handle.

    Returns:
        An `ImportReport` with per-table counts (text via ``str()``, HTML in notebooks).

    Raises:
        ImportSourceError: the file is not an nMEMORY v20 SQLite store, a row is corrupt,
            the target holds something else, or (`SourceRewrittenError`) the source was
            rewritten since the last import in a way that is not an append. Nothing is
            written to the target (a store this call would have created is not left).

    Examples:
        >>> import sqlite3, tempfile, os
        >>> import memframe as mf
        >>> tmp = tempfile.mkdtemp()
        >>> db = os.path.join(tmp, "memory.db")
        >>> con = sqlite3.connect(db)
        >>> _ = con.executescript("CREATE TABLE capsules (seq); PRAGMA user_version = 19;")
        >>> con.close()
        >>> try:
        ...     mf.importers.import_nmemory(db, os.path.join(tmp, "store"))
        ... except mf.MemframeError as exc:
        ...     print(str(exc).split(";")[0].endswith("has nMEMORY schema version 19"))
        True
        >>> os.path.exists(os.path.join(tmp, "store"))
        False
    """
    started = time.perf_counter()
    target = Path(store_path)
    notes = _Notes()
    src = _Source(sqlite_path)
    bar: _Progress | None = None
    try:
        store, existed = _target(target, clock)
        mark = store.watermarks.get(WATERMARK) if store is not None else None
        identity = src.identity()
        marks = _seq_marks(src)
        counts = {t: (marks[t]["rows"] if t in marks else src.count(t)) for t in SOURCE_TABLES}
        if store is not None and mark is None and int(store.snapshot.counter("seq")):
            raise ImportSourceError(
                f"{target} is a memframe store with rows no nMEMORY import wrote; import "
                f"into a new path (an incremental import only extends its own imports)"
            )
        if mark is not None:
            for name, value in mark["identity"].items():
                if value is not None and identity.get(name) != value:
                    raise ImportSourceError(
                        f"{target} was imported from a different nMEMORY store "
                        f"({mark['source']}); its {name} does not match {src.path}"
                    )
            if int(store.snapshot.counter("seq")) != int(mark["store_seq"]):
                raise ImportSourceError(
                    f"{target} was written to since its last nMEMORY import; an incremental "
                    f"import needs the store as that import left it: import into a new path"
                )
            todo = sum(counts[t] for t in SOURCE_TABLES if t not in _SEQ_TABLES) + sum(
                max(0, counts[t] - mark["tables"].get(t, _NO_MARK)["rows"])
                for t in _SEQ_TABLES)
        else:
            todo = sum(counts.values())
        bar = _Progress(progress, todo, "nmemory import: reading")
        if mark is None:
            plan = _full_plan(src, store.generation if store is not None else 0, notes, bar,
                              batch_rows)
        else:
            assert store is not None
            plan = _incremental_plan(src, store.pinned(), mark, notes, bar, batch_rows)
        nulls = src.count("capsules", "canonical_json IS NULL")
        if nulls != counts["tombstones"]:
            raise ImportSourceError(
                f"{src.path} has {nulls} capsule(s) without canonical_json but "
                f"{counts['tombstones']} tombstone(s); the source is inconsistent"
            )
        plan.watermark = {
            "source": str(src.path.resolve()),
            "schema_version": SCHEMA_VERSION,
            "identity": identity,
            "tables": {t: marks[t] for t in _SEQ_TABLES},
            "imports": (mark["imports"] + 1) if mark is not None else 1,
        }
        skipped = src.skipped_tables()
        mode = "full" if mark is None else "incremental"
        if mark is not None and plan.empty:
            generation, mode = store.generation, "unchanged"  # type: ignore[union-attr]
        else:
            bar.stage("nmemory import: writing")
            created = store is None
            if store is None:
                store = Store.create(target, clock=clock)
            try:
                store.commit(_apply(plan), operation=OPERATION)
            except BaseException:
                if created:
                    with contextlib.suppress(MemframeError):
                        store.discard_if_unused(remove_root=not existed)
                raise
            generation = store.generation
    except sqlite3.Error as exc:
        raise ImportSourceError(f"cannot read {src.path}: {exc}") from None
    else:
        return ImportReport(
            source=str(src.path),
            store=str(target),
            mode=mode,
            generation=generation,
            source_rows=counts,
            read={t: src.read_rows.get(t, 0) for t in SOURCE_TABLES},
            added=plan.added() if mode != "unchanged" else {},
            erased=len(plan.erase),
            skipped=skipped,
            notes=notes.items,
            seconds=time.perf_counter() - started,
        )
    finally:
        if bar is not None:
            bar.close()
        src.close()
