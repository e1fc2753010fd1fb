"""Schemas of the canonical tables and the projections, as pandera models.

Every frame is validated eagerly against its model before it is written; the
vocabularies below are the closed sets of spec/digest-reference.md (sections 2, 6).
"""

from __future__ import annotations

from typing import Annotated

import pandera.polars as pa
import polars as pl
from pandera.errors import SchemaError, SchemaErrors

from memframe.errors import SchemaValidationError

# --- closed vocabularies -----------------------------------------------------------------
RELATION_KINDS: tuple[str, ...] = (
    "supersedes",
    "derived_from",
    "witnesses",
    "blocks",
    "falsifies",
    "proposes",
    "part_of",
    "grounded_in",
    "abstracted_into",
)
RELATION_ORIGINS: tuple[str, ...] = ("manual", "import")
CLASSIFICATION_KINDS: tuple[str, ...] = (
    "fact",
    "procedure",
    "decision",
    "task",
    "epic",
    "brainstorm",
    "doc",
    "constraint",
    "capability",
    "failure_pattern",
)
CLASSIFICATION_SCOPES: tuple[str, ...] = ("project", "global", "session")
TIERS: tuple[str, ...] = ("active", "archived", "quarantined")
AUTHORITY_CLASSES: tuple[str, ...] = (
    "observed-fact",
    "user-stated",
    "agent-inferred",
    "externally-imported",
)
FORGET_MODES: tuple[str, ...] = ("tombstone", "redact", "purge")
MISS_OUTCOMES: tuple[str, ...] = ("missing_evidence", "abstain")
LANE_PAIRS: tuple[tuple[str, str], ...] = (
    ("term", "fused"),
    ("vector", "fused"),
    ("vector", "term"),
    ("fused", "term"),
)
BRACKET_EVENTS: tuple[str, ...] = ("start", "finish")
CORROBORATION_SOURCES: tuple[str, ...] = ("git",)
CORROBORATION_KINDS: tuple[str, ...] = ("anchor_path", "anchor_sha", "anchor_content", "mention")
CORROBORATION_VERDICTS: tuple[str, ...] = ("corroborated", "drifted", "missing")

Timestamp = Annotated[pl.Datetime, "ns", "UTC"]
TIMESTAMP = pl.Datetime("ns", "UTC")


class _Canonical(pa.DataFrameModel):
    """Columns every canonical table has."""

    seq: pl.Int64 = pa.Field(gt=0, unique=True)

    class Config:
        strict = True
        coerce = False


class Capsules(_Canonical):
    id: pl.String = pa.Field(str_startswith="cap-")
    created_at: Timestamp
    project_id: pl.String = pa.Field(str_length={"min_value": 1})
    content: pl.String = pa.Field(nullable=True)  # null once purged/redacted
    content_chars: pl.Int64 = pa.Field(ge=0)
    source: pl.String = pa.Field(str_length={"min_value": 1})
    anchor: pl.String = pa.Field(str_length={"min_value": 1})
    source_hash: pl.String = pa.Field(str_matches=r"^[0-9a-f]{64}$")
    confidence: pl.Float64 = pa.Field(ge=0.0, le=1.0)
    valid_from: Timestamp
    valid_to: Timestamp = pa.Field(nullable=True)
    authority_class: pl.String = pa.Field(isin=list(AUTHORITY_CLASSES))
    instruction_taint: pl.Boolean
    conversation_id: pl.String = pa.Field(nullable=True)
    author: pl.String = pa.Field(nullable=True)


class Relations(_Canonical):
    at: Timestamp
    kind: pl.String = pa.Field(isin=list(RELATION_KINDS))
    from_id: pl.String
    to_id: pl.String
    origin: pl.String = pa.Field(isin=list(RELATION_ORIGINS))


class Forgets(_Canonical):
    at: Timestamp
    capsule_id: pl.String
    mode: pl.String = pa.Field(isin=list(FORGET_MODES))
    reason: pl.String = pa.Field(nullable=True)


class Recalls(_Canonical):
    at: Timestamp
    capsule_id: pl.String
    count: pl.Int64 = pa.Field(ge=1)


class Classifications(_Canonical):
    at: Timestamp
    capsule_id: pl.String
    kind: pl.String = pa.Field(isin=list(CLASSIFICATION_KINDS))
    scope: pl.String = pa.Field(isin=list(CLASSIFICATION_SCOPES))


class Tiers(_Canonical):
    at: Timestamp
    capsule_id: pl.String
    tier: pl.String = pa.Field(isin=list(TIERS))


class Brackets(_Canonical):
    at: Timestamp
    session_id: pl.String = pa.Field(str_startswith="sess-")
    event: pl.String = pa.Field(isin=list(BRACKET_EVENTS))
    project_id: pl.String
    summary: pl.String = pa.Field(nullable=True)


class Processing(_Canonical):
    at: Timestamp
    capsule_id: pl.String
    abstracted_into_memory_id: pl.String


class Summaries(_Canonical):
    at: Timestamp
    conversation_id: pl.String
    summary: pl.String


class Journal(_Canonical):
    audit_seq: pl.Int64 = pa.Field(gt=0)
    at: Timestamp
    actor: pl.String
    action: pl.String
    subject: pl.String
    reason: pl.String = pa.Field(nullable=True)
    chained_hash: pl.String


class RecallMisses(_Canonical):
    at: Timestamp
    term: pl.String = pa.Field(str_length={"min_value": 1})
    outcome: pl.String = pa.Field(isin=list(MISS_OUTCOMES))


class LaneOverrides(_Canonical):
    at: Timestamp
    forced: pl.String
    auto_pick: pl.String


class Corroborations(_Canonical):
    at: Timestamp
    capsule_id: pl.String
    source: pl.String = pa.Field(isin=list(CORROBORATION_SOURCES))
    kind: pl.String = pa.Field(isin=list(CORROBORATION_KINDS))
    ref: pl.String
    verdict: pl.String = pa.Field(isin=list(CORROBORATION_VERDICTS))
    detail: pl.String = pa.Field(nullable=True)


class SourceCursors(_Canonical):
    at: Timestamp
    source_key: pl.String = pa.Field(str_length={"min_value": 1})
    cursor: pl.String


# table name -> model, in the order of DESIGN.md section 2
CANONICAL_TABLES: dict[str, type[pa.DataFrameModel]] = {
    "capsules": Capsules,
    "relations": Relations,
    "forgets": Forgets,
    "recalls": Recalls,
    "classifications": Classifications,
    "tiers": Tiers,
    "brackets": Brackets,
    "processing": Processing,
    "summaries": Summaries,
    "journal": Journal,
    "recall_misses": RecallMisses,
    "lane_overrides": LaneOverrides,
    "corroborations": Corroborations,
    "source_cursors": SourceCursors,
}

_DTYPES: dict[str, pl.DataType] = {
    "seq": pl.Int64(),
    "audit_seq": pl.Int64(),
    "content_chars": pl.Int64(),
    "count": pl.Int64(),
    "confidence": pl.Float64(),
    "instruction_taint": pl.Boolean(),
}
_TIME_COLUMNS = {"created_at", "valid_from", "valid_to", "at"}


def _column_dtype(name: str) -> pl.DataType:
    if name in _TIME_COLUMNS:
        return TIMESTAMP
    return _DTYPES.get(name, pl.String())


def table_schema(table: str) -> pl.Schema:
    """The Polars schema of a canonical table (column order as written).

    Examples:
        >>> from memframe.schema import table_schema
        >>> table_schema("recalls")["count"]
        Int64
    """
    model = _model(table)
    names = list(model.to_schema().columns)
    return pl.Schema({name: _column_dtype(name) for name in names})


def empty_frame(table: str) -> pl.DataFrame:
    """A zero-row frame with the table's schema."""
    return pl.DataFrame(schema=table_schema(table))


def _model(table: str) -> type[pa.DataFrameModel]:
    try:
        return CANONICAL_TABLES[table]
    except KeyError:
        raise KeyError(
            f"unknown table {table!r}; the canonical tables are: {', '.join(CANONICAL_TABLES)}"
        ) from None


def validate_frame(table: str, frame: pl.DataFrame) -> pl.DataFrame:
    """Validate an eager frame against its table's model; raise naming column and row.

    Raises:
        SchemaValidationError: the first failure, with the column and the row index.
    """
    model = _model(table)
    expected = table_schema(table)
    missing = [c for c in expected if c not in frame.columns]
    extra = [c for c in frame.columns if c not in expected]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing column(s) {', '.join(missing)}")
        if extra:
            parts.append(f"unexpected column(s) {', '.join(extra)}")
        raise SchemaValidationError(
            f"{table}: {'; '.join(parts)}; expected exactly: {', '.join(expected)}",
            table=table,
            column=(missing or extra)[0],
            row=None,
        )
    for name, dtype in expected.items():
        if frame.schema[name] != dtype:
            raise SchemaValidationError(
                f"{table}.{name}: dtype {frame.schema[name]} where {dtype} is required; "
                f"cast the column before writing",
                table=table,
                column=name,
                row=None,
            )
    try:
        model.validate(frame.select(expected.names()), lazy=True)
    except (SchemaErrors, SchemaError) as exc:
        raise _teaching_error(table, exc) from None
    return frame.select(expected.names())


def _teaching_error(table: str, exc: SchemaErrors | SchemaError) -> SchemaValidationError:
    cases = getattr(exc, "failure_cases", None)
    column = check = value = row = None
    if isinstance(cases, pl.DataFrame) and cases.height:
        first = cases.sort("index", nulls_last=True).row(0, named=True)
        column, check, value, row = (
            first.get("column"),
            first.get("check"),
            first.get("failure_case"),
            first.get("index"),
        )
    where = f" at row {row}" if row is not None else ""
    return SchemaValidationError(
        f"{table}.{column}: value {value!r}{where} fails {check}; fix the row and write again",
        table=table,
        column=column,
        row=row,
    )
