"""The session projection's fold: one function, two callers (rebuild and cycle).

The fold is a Polars group-by over *partial rows*. Every input maps to a partial:

* a capsule with a ``conversation_id`` is a one-row partial (a span of one instant,
  ``memory_count`` 1, its recorded ``content_chars``, itself as the last member);
* a canonical ``summaries`` row is a partial that carries only a summary and its ``seq``;
* an existing projection row is already a partial (its summary came from a ``seq`` at or
  below the watermark, so any summary folded with it is newer).

Every term is exact and order-independent: ``min``, ``max``, ``sum``, and "last" as the
arg-max of ``(created_at, capsule number)`` (ids are ``cap-<n>``); the summary is the latest by ``seq``.
So folding everything at once (rebuild) and folding the rows written since the watermark
into the stored rows of the conversations they touch (cycle) give the same row, to the
hash, whatever the batching and even when a row arrives late with an older
``created_at``.

A row carries no author and no stability (spec 000, rule 6). Capsules without a
``conversation_id`` are members of no session. A conversation named only by a summary
row (no capsule yet) keeps a row with ``memory_count`` 0 so that the summary survives
until its first member arrives; the doors never show such rows.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Literal

import polars as pl

from memframe.ids import capsule_number_expr
from memframe.schema import TIMESTAMP
from memframe.text import rfc3339, sha256_hex

if TYPE_CHECKING:
    import pandera.polars as pa

__all__ = [
    "SESSION_SCHEMA",
    "session_row_model",
    "PARTIAL_SCHEMA",
    "capsule_partials",
    "summary_partials",
    "row_partials",
    "combine_partials",
    "fold_sessions",
    "canonical_line",
    "with_hash",
]

#: The stored session row, in column order.
SESSION_SCHEMA = pl.Schema(
    {
        "conversation_id": pl.String(),
        "first_at": TIMESTAMP,
        "last_at": TIMESTAMP,
        "memory_count": pl.Int64(),
        "content_chars": pl.Int64(),
        "last_member_id": pl.String(),
        "summary": pl.String(),
        "hash": pl.String(),
    }
)

#: A partial row: what the fold groups. ``last_member_num`` and ``summary_seq`` are the
#: tie-breakers of the two "last" terms; they are not stored.
PARTIAL_SCHEMA = pl.Schema(
    {
        "conversation_id": pl.String(),
        "first_at": TIMESTAMP,
        "last_at": TIMESTAMP,
        "memory_count": pl.Int64(),
        "content_chars": pl.Int64(),
        "last_member_id": pl.String(),
        "last_member_num": pl.Int64(),
        "summary": pl.String(),
        "summary_seq": pl.Int64(),
    }
)

_HASHED = ("conversation_id", "first_at", "last_at", "memory_count", "content_chars",
           "last_member_id", "summary")

Timestamp = Annotated[pl.Datetime, "ns", "UTC"]
EngineName = Literal["in-memory", "streaming", "auto"]


def _declare_session_row() -> type[pa.DataFrameModel]:
    import pandera.polars as pa  # declared on first write: reading never imports pandera

    class SessionRow(pa.DataFrameModel):
        """pandera model of a stored session row (validated before every write)."""

        conversation_id: pl.String = pa.Field(unique=True)
        first_at: Timestamp = pa.Field(nullable=True)
        last_at: Timestamp = pa.Field(nullable=True)
        memory_count: pl.Int64 = pa.Field(ge=0)
        content_chars: pl.Int64 = pa.Field(ge=0)
        last_member_id: pl.String = pa.Field(nullable=True)
        summary: pl.String = pa.Field(nullable=True)
        hash: pl.String = pa.Field(str_matches=r"^[0-9a-f]{64}$")

        class Config:
            strict = True
            coerce = False

    return SessionRow


_MODELS: dict[str, type[pa.DataFrameModel]] = {}


def session_row_model() -> type[pa.DataFrameModel]:
    """The pandera model of a stored session row (declared once, on first use)."""
    if "SessionRow" not in _MODELS:
        _MODELS["SessionRow"] = _declare_session_row()
    return _MODELS["SessionRow"]


def __getattr__(name: str) -> type[pa.DataFrameModel]:
    if name == "SessionRow":
        return session_row_model()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _number(id_expr: pl.Expr) -> pl.Expr:
    """The capsule number of a ``cap-<n>`` id (null for any other shape)."""
    return capsule_number_expr(id_expr)


def capsule_partials(capsules: pl.LazyFrame) -> pl.LazyFrame:
    """Capsule rows -> one-row partials (capsules without a conversation_id drop out).

    Args:
        capsules: capsule rows with at least ``id``, ``created_at``, ``content_chars``
            and ``conversation_id``.

    Returns:
        A LazyFrame of ``PARTIAL_SCHEMA``.

    Examples:
        >>> import polars as pl, datetime as dt
        >>> t = dt.datetime(2026, 7, 23, tzinfo=dt.timezone.utc)
        >>> caps = pl.LazyFrame({"id": ["cap-1", "cap-2"], "created_at": [t, t],
        ...                      "content_chars": [3, 4], "conversation_id": ["c", None]})
        >>> capsule_partials(caps).collect()["last_member_num"].to_list()
        [1]
    """
    return capsules.filter(pl.col("conversation_id").is_not_null()).select(
        pl.col("conversation_id").cast(pl.String),
        pl.col("created_at").cast(TIMESTAMP).alias("first_at"),
        pl.col("created_at").cast(TIMESTAMP).alias("last_at"),
        pl.lit(1, dtype=pl.Int64).alias("memory_count"),
        pl.col("content_chars").cast(pl.Int64),
        pl.col("id").cast(pl.String).alias("last_member_id"),
        _number(pl.col("id")).alias("last_member_num"),
        pl.lit(None, dtype=pl.String).alias("summary"),
        pl.lit(None, dtype=pl.Int64).alias("summary_seq"),
    )


def summary_partials(summaries: pl.LazyFrame) -> pl.LazyFrame:
    """Canonical ``summaries`` rows -> partials carrying only the summary and its seq."""
    return summaries.select(
        pl.col("conversation_id").cast(pl.String),
        pl.lit(None, dtype=TIMESTAMP).alias("first_at"),
        pl.lit(None, dtype=TIMESTAMP).alias("last_at"),
        pl.lit(0, dtype=pl.Int64).alias("memory_count"),
        pl.lit(0, dtype=pl.Int64).alias("content_chars"),
        pl.lit(None, dtype=pl.String).alias("last_member_id"),
        pl.lit(None, dtype=pl.Int64).alias("last_member_num"),
        pl.col("summary").cast(pl.String),
        pl.col("seq").cast(pl.Int64).alias("summary_seq"),
    )


def row_partials(rows: pl.LazyFrame) -> pl.LazyFrame:
    """Stored session rows -> partials (a stored summary ranks below any newer summary row)."""
    return rows.select(
        "conversation_id",
        "first_at",
        "last_at",
        "memory_count",
        "content_chars",
        "last_member_id",
        _number(pl.col("last_member_id")).alias("last_member_num"),
        "summary",
        pl.when(pl.col("summary").is_not_null()).then(pl.lit(0, dtype=pl.Int64))
        .otherwise(pl.lit(None, dtype=pl.Int64)).alias("summary_seq"),
    )


def fold_sessions(
    capsules: pl.LazyFrame,
    summaries: pl.LazyFrame,
    existing: pl.LazyFrame | None = None,
    *,
    engine: EngineName = "in-memory",
) -> pl.DataFrame:
    """THE session fold: capsules, summaries and existing rows -> session rows with hashes.

    Rebuild calls it with every capsule and summary and no existing rows; the cycle calls
    it with the rows written since the watermark and the stored rows of the
    conversations they touch. Both get the same rows and hashes.

    Args:
        capsules: capsule rows (``id``, ``created_at``, ``content_chars``,
            ``conversation_id``); rows without a conversation_id are ignored.
        summaries: canonical ``summaries`` rows (``seq``, ``conversation_id``, ``summary``).
        existing: stored session rows to fold with them, or None.
        engine: the Polars engine for the group-by (measured: streaming for a rebuild over
            millions of rows, in-memory for a cycle's few thousand).

    Returns:
        A DataFrame of ``SESSION_SCHEMA``, sorted by ``conversation_id``.

    Examples:
        >>> import polars as pl, datetime as dt
        >>> t = dt.datetime(2026, 7, 23, tzinfo=dt.timezone.utc)
        >>> caps = pl.LazyFrame({"id": ["cap-1", "cap-2", "cap-3"],
        ...                      "created_at": [t, t + dt.timedelta(seconds=5), t],
        ...                      "content_chars": [3, 4, 5],
        ...                      "conversation_id": ["c", "c", "d"]})
        >>> sums = pl.LazyFrame(schema={"seq": pl.Int64, "conversation_id": pl.String,
        ...                             "summary": pl.String})
        >>> out = fold_sessions(caps, sums)
        >>> out.select("conversation_id", "memory_count", "content_chars",
        ...            "last_member_id").rows()
        [('c', 2, 7, 'cap-2'), ('d', 1, 5, 'cap-3')]
    """
    pieces = [capsule_partials(capsules), summary_partials(summaries)]
    if existing is not None:
        pieces.append(row_partials(existing))
    rows = combine_partials(pl.concat(pieces, how="vertical")).collect(engine=engine)
    return with_hash(rows).sort("conversation_id")  # the stored row: partial terms dropped


def combine_partials(partials: pl.LazyFrame) -> pl.LazyFrame:
    """Partials -> one partial per conversation (the fold's terms; no hash).

    A combined partial is a partial again, so partials may be combined in any grouping
    and order (the session projection keeps them so: `memframe.projections.session_rows`).

    Examples:
        >>> import polars as pl, datetime as dt
        >>> t = dt.datetime(2026, 7, 23, tzinfo=dt.timezone.utc)
        >>> caps = pl.LazyFrame({"id": ["cap-1", "cap-2"], "created_at": [t, t],
        ...                      "content_chars": [3, 4], "conversation_id": ["c", "c"]})
        >>> combine_partials(capsule_partials(caps)).collect().select(
        ...     "memory_count", "content_chars", "last_member_id").row(0)
        (2, 7, 'cap-2')
    """
    folded = partials.group_by("conversation_id").agg(
        pl.col("first_at").min(),
        pl.col("last_at").max(),
        pl.col("memory_count").sum(),
        pl.col("content_chars").sum(),
        # arg-max of (created_at, capsule number): ids are cap-<n>, n unique, so no tie is
        # left; partials without a member (null instants) sort first
        pl.col("last_member_id").sort_by("last_at", "last_member_num").last(),
        pl.col("last_member_num").sort_by("last_at", "last_member_num").last(),
    )
    # the latest summary by seq, folded over the (few) partials that carry one
    summaries_latest = (
        partials.filter(pl.col("summary").is_not_null())
        .group_by("conversation_id")
        .agg(pl.col("summary").sort_by("summary_seq").last(), pl.col("summary_seq").max())
    )
    return folded.join(summaries_latest, on="conversation_id", how="left").select(
        list(PARTIAL_SCHEMA))


# ---- canonical serialisation -------------------------------------------------------------

_JSON_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t",
                 "\b": "\\b", "\f": "\\f"}
for _code in range(0x20):
    _JSON_ESCAPES.setdefault(chr(_code), f"\\u{_code:04x}")


def _json_string(expr: pl.Expr) -> pl.Expr:
    """A String column as JSON string literals (json.dumps, ensure_ascii=False); null -> null."""
    keys = list(_JSON_ESCAPES)
    quoted = pl.lit('"') + expr.str.replace_many(keys, [_JSON_ESCAPES[k] for k in keys]) + pl.lit('"')
    return pl.when(expr.is_null()).then(pl.lit("null")).otherwise(quoted)


def _json_time(expr: pl.Expr) -> pl.Expr:
    return pl.when(expr.is_null()).then(pl.lit("null")).otherwise(
        pl.lit('"') + rfc3339(expr) + pl.lit('"'))


def canonical_line() -> pl.Expr:
    """The canonical serialisation of a session row, as a Polars expression.

    Compact JSON with fixed key order (``conversation_id``, ``first_at``, ``last_at``,
    ``memory_count``, ``content_chars``, ``last_member_id``, ``summary``), timestamps as
    RFC3339 with up to 9 fractional digits, strings escaped exactly as
    ``json.dumps(..., ensure_ascii=False, separators=(",", ":"))`` escapes them. It is
    built from plain string operations, so it does not depend on any library's own
    JSON or hash encoding.

    Examples:
        >>> import polars as pl, datetime as dt
        >>> t = dt.datetime(2026, 7, 23, tzinfo=dt.timezone.utc)
        >>> row = pl.DataFrame({"conversation_id": ['c"1'], "first_at": [t], "last_at": [t],
        ...     "memory_count": [1], "content_chars": [2], "last_member_id": ["cap-1"],
        ...     "summary": [None]}, schema_overrides={"summary": pl.String})
        >>> row.select(canonical_line()).item()
        '{"conversation_id":"c\\\\"1","first_at":"2026-07-23T00:00:00Z","last_at":"2026-07-23T00:00:00Z","memory_count":1,"content_chars":2,"last_member_id":"cap-1","summary":null}'
    """
    parts: list[pl.Expr] = []
    for i, name in enumerate(_HASHED):
        col = pl.col(name)
        if name in ("first_at", "last_at"):
            value = _json_time(col)
        elif name in ("memory_count", "content_chars"):
            value = col.cast(pl.String)
        else:
            value = _json_string(col)
        parts.append(pl.lit(("{" if i == 0 else ",") + json.dumps(name) + ":"))
        parts.append(value)
    parts.append(pl.lit("}"))
    return pl.concat_str(parts).alias("line")


def with_hash(rows: pl.DataFrame) -> pl.DataFrame:
    """Add the ``hash`` column (sha256 of the canonical line) and order the columns.

    Done eagerly, after the group-by: a Python call inside a lazy plan would hold the
    engine back.
    """
    lines = rows.select(canonical_line()).to_series()
    return rows.with_columns(sha256_hex(lines).alias("hash")).select(list(SESSION_SCHEMA))
