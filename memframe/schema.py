"""Schemas of the canonical tables, as pandera models.

Every frame is validated eagerly against its model before it is written; the
vocabularies below are the closed sets of spec/digest-reference.md (sections 2, 6).
The models are declared on first use (``schema.Capsules``, ``model("capsules")``): pandera
is only imported by code that writes, so reading a store (the digest, the doors) starts
fast.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

import polars as pl

from memframe.errors import SchemaValidationError
from memframe.ids import SESSION_PATTERN

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
    "about",
    "abstracted_into",
)
#: the relation kinds nMEMORY's own schema admits, by schema version (v21, release 0.3.0,
#: added ``about``); ``abstracted_into`` is memframe's own (abstract()), never an engine's
ENGINE_RELATION_KINDS: dict[int, tuple[str, ...]] = {
    20: RELATION_KINDS[:8],
    21: RELATION_KINDS[:9],
}
#: the one kind whose ``to`` end must not be forgotten when the edge is written (reference
#: 0.1: the engine's relate verb refuses it; edges written before the forget stay)
LIVE_TARGET_KINDS: tuple[str, ...] = ("about",)
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
#: the provenance source of a bracket handoff (reference 2.3), matched exactly: what
#: ``session_finish`` writes, and any ingest with that source counts too
HANDOFF_SOURCE = "memory_session_finish"
#: a thread handoff (reference 2.3): content opening ``ACTIVE(``; the label is everything up
#: to the first ``)`` (may be empty, may hold newlines); no ``)``, no label
THREAD_PATTERN = r"^ACTIVE\(([^)]*)\)"
#: journal actions that account for a tombstone (reference 4.14: a tombstoned capsule no
#: such row names is out of band)
FORGET_ACTIONS: tuple[str, ...] = ("memory_forget", "memory_merge")
#: forget modes that erase the content (the others leave it)
ERASING_MODES: tuple[str, ...] = ("redact", "purge")
#: a superseded capsule more than this many whole days old with no recall is an archive
#: candidate (reference 4.15)
ARCHIVE_AFTER_DAYS = 180
#: ``whole_days(now - created_at) > 180`` is ``now - created_at >= 181 days``, in ns
STALE_AFTER_NS = (ARCHIVE_AFTER_DAYS + 1) * 86_400 * 1_000_000_000
#: review verdicts (reference 2.1 / 6): a capsule is staged while its latest is not ratified
REVIEW_VERDICTS: tuple[str, ...] = ("proposed", "ratified", "rejected")
#: what a recall answered (nMEMORY 0.3.0's receipts): grounded in returned capsules, or a
#: miss of either kind
RECEIPT_OUTCOMES: tuple[str, ...] = ("grounded", *MISS_OUTCOMES)
#: recall lanes a receipt names (the router's picks)
RECALL_LANES: tuple[str, ...] = ("term", "vector", "fused")
#: how a claim relates to observation (nMEMORY 0.3.0's epistemic sidecar, a closed set)
EVIDENCE_STATES: tuple[str, ...] = ("observed", "inferred", "unverified")
#: a receipt's id: ``rcpt-<n>``, n from 1, counted per store as the engine issues them
RECEIPT_PATTERN = r"^rcpt-[1-9][0-9]*$"
#: the journal action of a taught recall alias (the engine's verb, ``memory_alias``)
ALIAS_ACTION = "memory_alias"
#: the columns the write path keeps beside a taught alias's folded ``term`` and ``alias``:
#: the two as the caller spelled them, which its journal row names (as the engine audits)
ALIAS_GIVEN: tuple[str, str] = ("_term_given", "_alias_given")

Timestamp = Annotated[pl.Datetime, "ns", "UTC"]
TIMESTAMP = pl.Datetime("ns", "UTC")


if TYPE_CHECKING:
    import pandera.polars as pa

# table name -> its columns in order, as DESIGN.md section 2 lists the tables
CANONICAL_COLUMNS: dict[str, tuple[str, ...]] = {
    "capsules": ("seq", "id", "created_at", "project_id", "content", "content_chars", "source",
                 "anchor", "source_hash", "confidence", "valid_from", "valid_to",
                 "authority_class", "instruction_taint", "conversation_id", "author"),
    "relations": ("seq", "at", "kind", "from_id", "to_id", "origin"),
    "forgets": ("seq", "at", "capsule_id", "mode", "reason"),
    "recalls": ("seq", "at", "capsule_id", "count"),
    "classifications": ("seq", "at", "capsule_id", "kind", "scope"),
    "tiers": ("seq", "at", "capsule_id", "tier"),
    "brackets": ("seq", "at", "session_id", "event", "project_id", "summary"),
    "processing": ("seq", "at", "capsule_id", "abstracted_into_memory_id"),
    "summaries": ("seq", "at", "conversation_id", "summary"),
    "journal": ("seq", "audit_seq", "at", "actor", "action", "subject", "reason", "chained_hash"),
    "recall_misses": ("seq", "at", "term", "outcome"),
    "lane_overrides": ("seq", "at", "forced", "auto_pick"),
    "corroborations": ("seq", "at", "capsule_id", "source", "kind", "ref", "verdict", "detail"),
    "source_cursors": ("seq", "at", "source_key", "cursor"),
    "reviews": ("seq", "at", "capsule_id", "verdict", "reason", "actor"),
    "pins": ("seq", "at", "capsule_id", "pinned", "reason", "actor"),
    "recall_receipts": ("seq", "at", "id", "terms", "returned_ids", "outcome", "lane",
                        "project_id", "project_prefix", "session_id"),
    "event_times": ("seq", "at", "capsule_id", "event_at", "event_from", "event_to"),
    "epistemics": ("seq", "at", "capsule_id", "evidence_state", "proof_hint", "stale_if"),
    "recall_aliases": ("seq", "at", "term", "alias"),
}
CANONICAL_TABLES: tuple[str, ...] = tuple(CANONICAL_COLUMNS)

_MODEL_NAMES = {
    "capsules": "Capsules", "relations": "Relations", "forgets": "Forgets",
    "recalls": "Recalls", "classifications": "Classifications", "tiers": "Tiers",
    "brackets": "Brackets", "processing": "Processing", "summaries": "Summaries",
    "journal": "Journal", "recall_misses": "RecallMisses", "lane_overrides": "LaneOverrides",
    "corroborations": "Corroborations", "source_cursors": "SourceCursors",
    "reviews": "Reviews", "pins": "Pins", "recall_receipts": "RecallReceipts",
    "event_times": "EventTimes", "epistemics": "Epistemics",
    "recall_aliases": "RecallAliases",
}


@functools.cache
def _models() -> dict[str, type[pa.DataFrameModel]]:
    """Declare the pandera models (once, on first use)."""
    import pandera.polars as pa

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
        session_id: pl.String = pa.Field(str_matches=SESSION_PATTERN)
        event: pl.String = pa.Field(isin=list(BRACKET_EVENTS))
        # null: a session imported from an nMEMORY store, whose sessions hold no project,
        # that holds no capsule either (nothing says which project it was)
        project_id: pl.String = pa.Field(nullable=True)
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


    class Reviews(_Canonical):
        at: Timestamp
        capsule_id: pl.String = pa.Field(str_startswith="cap-")
        verdict: pl.String = pa.Field(isin=list(REVIEW_VERDICTS))
        reason: pl.String = pa.Field(nullable=True)
        actor: pl.String = pa.Field(str_length={"min_value": 1})


    class Pins(_Canonical):
        at: Timestamp
        capsule_id: pl.String = pa.Field(str_startswith="cap-")
        pinned: pl.Boolean
        reason: pl.String = pa.Field(nullable=True)
        actor: pl.String = pa.Field(str_length={"min_value": 1})



    class RecallReceipts(_Canonical):
        at: Timestamp
        id: pl.String = pa.Field(str_matches=RECEIPT_PATTERN, unique=True)
        # pandera's polars backend takes a dtype instance as the annotation of a nested
        # column; the type checker knows only classes there
        terms: pl.List(pl.String)  # type: ignore[valid-type]
        returned_ids: pl.List(pl.String)  # type: ignore[valid-type]
        outcome: pl.String = pa.Field(isin=list(RECEIPT_OUTCOMES))
        lane: pl.String = pa.Field(nullable=True, isin=list(RECALL_LANES))
        project_id: pl.String = pa.Field(nullable=True)
        project_prefix: pl.String = pa.Field(nullable=True)
        session_id: pl.String = pa.Field(nullable=True, str_matches=SESSION_PATTERN)


    class EventTimes(_Canonical):
        at: Timestamp
        capsule_id: pl.String = pa.Field(str_startswith="cap-")
        event_at: Timestamp = pa.Field(nullable=True)
        event_from: Timestamp = pa.Field(nullable=True)
        event_to: Timestamp = pa.Field(nullable=True)


    class Epistemics(_Canonical):
        at: Timestamp
        capsule_id: pl.String = pa.Field(str_startswith="cap-")
        evidence_state: pl.String = pa.Field(nullable=True, isin=list(EVIDENCE_STATES))
        proof_hint: pl.String = pa.Field(nullable=True)
        stale_if: pl.String = pa.Field(nullable=True)


    class RecallAliases(_Canonical):
        at: Timestamp
        # both folded (memframe.text.fold_term) and different; (term, alias) stored once
        term: pl.String = pa.Field(str_length={"min_value": 1})
        alias: pl.String = pa.Field(str_length={"min_value": 1})

    declared = locals()
    return {table: declared[name] for table, name in _MODEL_NAMES.items()}


def model(table: str) -> type[pa.DataFrameModel]:
    """The pandera model of a canonical table.

    Examples:
        >>> from memframe.schema import model
        >>> model("tiers").__name__
        'Tiers'
    """
    if table not in CANONICAL_COLUMNS:
        raise KeyError(
            f"unknown table {table!r}; the canonical tables are: {', '.join(CANONICAL_TABLES)}"
        )
    return _models()[table]


def __getattr__(name: str) -> Any:
    for table, model_name in _MODEL_NAMES.items():
        if name == model_name:
            return model(table)
    raise AttributeError(f"module 'memframe.schema' has no attribute {name!r}")


_DTYPES: dict[str, pl.DataType] = {
    "seq": pl.Int64(),
    "audit_seq": pl.Int64(),
    "content_chars": pl.Int64(),
    "count": pl.Int64(),
    "confidence": pl.Float64(),
    "instruction_taint": pl.Boolean(),
    "pinned": pl.Boolean(),
}
_TIME_COLUMNS = {"created_at", "valid_from", "valid_to", "at", "event_at", "event_from",
                 "event_to"}
_LIST_COLUMNS = {"terms", "returned_ids"}


def _column_dtype(name: str) -> pl.DataType:
    if name in _TIME_COLUMNS:
        return TIMESTAMP
    if name in _LIST_COLUMNS:
        return pl.List(pl.String)
    return _DTYPES.get(name, pl.String())


def table_schema(table: str) -> pl.Schema:
    """The Polars schema of a canonical table (column order as written).

    Examples:
        >>> from memframe.schema import table_schema
        >>> table_schema("recalls")["count"]
        Int64
    """
    if table not in CANONICAL_COLUMNS:
        raise KeyError(
            f"unknown table {table!r}; the canonical tables are: {', '.join(CANONICAL_TABLES)}"
        )
    return pl.Schema({name: _column_dtype(name) for name in CANONICAL_COLUMNS[table]})


def empty_frame(table: str) -> pl.DataFrame:
    """A zero-row frame with the table's schema."""
    return empty_of(table_schema(table))


def empty_of(schema: Mapping[str, Any]) -> pl.DataFrame:
    """A zero-row frame with ``schema``: built once per schema, then cleared (building
    one column by column costs about 0.4 ms, a warm digest's tenth of a millisecond more
    per empty frame).

    Examples:
        >>> frame = empty_of({"a": pl.Int64, "b": pl.String})
        >>> frame.height, frame.columns, frame.dtypes
        (0, ['a', 'b'], [Int64, String])
    """
    return _empty(tuple(schema.items())).clear()


#: a table's schema, built once for the write path's checks (read, never changed)
_expected = functools.cache(table_schema)


@functools.lru_cache(maxsize=256)
def _empty(columns: tuple[tuple[str, Any], ...]) -> pl.DataFrame:
    return pl.DataFrame(schema=dict(columns))


def validate_frame(table: str, frame: pl.DataFrame) -> pl.DataFrame:
    """Validate an eager frame against its table's model; raise naming column and row.

    Raises:
        SchemaValidationError: the first failure, with the column and the row index.
    """
    from pandera.errors import SchemaError, SchemaErrors

    table_model = model(table)
    expected = _expected(table)
    # the frame's schema once: `frame.schema` builds a new one at every call
    have = frame.schema
    missing = [c for c in expected if c not in have]
    extra = [c for c in have if c not in expected]
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
        if have[name] != dtype:
            raise SchemaValidationError(
                f"{table}.{name}: dtype {have[name]} where {dtype} is required; "
                f"cast the column before writing",
                table=table,
                column=name,
                row=None,
            )
    if list(have) != list(expected):
        frame = frame.select(expected.names())
    if _passes(table, frame):
        return frame  # every rule of the model holds; pandera would find nothing
    try:
        table_model.validate(frame, lazy=True)  # names the column, check and row
    except (SchemaErrors, SchemaError) as exc:
        raise _teaching_error(table, exc) from None
    return frame


def _check_expr(name: str, stats: dict[str, Any], col: pl.Expr) -> pl.Expr | None:
    """A pandera built-in check as one Polars expression (None: not one we translate)."""
    match name:
        case "greater_than":
            return col > stats["min_value"]
        case "greater_than_or_equal_to":
            return col >= stats["min_value"]
        case "less_than":
            return col < stats["max_value"]
        case "less_than_or_equal_to":
            return col <= stats["max_value"]
        case "isin":
            return col.is_in(list(stats["allowed_values"]))
        case "str_startswith":
            return col.str.starts_with(stats["string"])
        case "str_matches":
            return col.str.contains(stats["pattern"])
        case "str_length":
            n = col.str.len_chars()
            if stats.get("exact_value") is not None:
                return n == stats["exact_value"]
            lo, hi = stats.get("min_value"), stats.get("max_value")
            return (n >= (lo if lo is not None else 0)) & (
                n <= hi if hi is not None else pl.lit(True))
    return None


@functools.cache
def _rules_expr(table: str) -> pl.Expr | None:
    """The whole model of ``table`` as one boolean expression: True when every row passes.

    The write path evaluates the model's own rules in one Polars pass (pandera runs one
    query per check, the dominant cost of a small commit); only a frame that fails goes
    through pandera, for its error naming column, check and row. None when the model has
    a check this translation does not know (then pandera validates every frame).
    """
    terms: list[pl.Expr] = []
    for name, column in model(table).to_schema().columns.items():
        col = pl.col(name)
        if not column.nullable:
            terms.append(col.is_not_null().all())
        if column.unique:
            terms.append(col.n_unique() == pl.len())
        for check in column.checks:
            expr = _check_expr(check.name, dict(check.statistics or {}), col)
            if expr is None:
                return None
            terms.append((expr | col.is_null()).all())
    return pl.all_horizontal(terms) if terms else pl.lit(True)


def _passes(table: str, frame: pl.DataFrame) -> bool:
    expr = _rules_expr(table)
    if expr is None or frame.height == 0:
        return False
    return bool(frame.select(expr.fill_null(False)).item())


def _teaching_error(table: str, exc: Exception) -> SchemaValidationError:
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


# --- write rules: one declaration per event table -------------------------------------------

@dataclasses.dataclass(frozen=True)
class TableRules:
    """How rows of one canonical table are written, declared once beside its model.

    The bulk path (`Store.append`) enforces exactly this, and the verbs stage their rows
    through the same checks, so the two cannot drift.

    Attributes:
        defaults: values for columns a caller may leave out (``at`` defaults to the clock).
        capsule_refs: columns that name a capsule; each must be a ``cap-<n>`` the store
            issued (``relations.from_id`` may also be an outcome ``out-<n>`` for
            ``falsifies``).
        accepts_tombstoned: whether a referenced capsule may already be forgotten (usage,
            kind and tier are about the record, as in nMEMORY; so are edges and forgets).
        nonblank: text columns that must hold more than white space.
        optional_text: text columns that may be left out (null) but, when given, must
            hold more than white space.
        dedupe: the key whose repeats are skipped (relations: an edge is stored once).
        journal: (action, subject column, reason expression) of the one journal row each
            written row gets, or None for tables that are not audited (usage, misses and
            lane overrides, as that engine does). The action is a name, or an expression
            when it depends on the row (a review's verdict).

    A default of `WRITER_ACTOR` takes the writing handle's actor.
    """

    defaults: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    capsule_refs: tuple[str, ...] = ()
    accepts_tombstoned: bool = True
    nonblank: tuple[str, ...] = ()
    optional_text: tuple[str, ...] = ()
    dedupe: tuple[str, ...] = ()
    journal: tuple[str | pl.Expr, str, pl.Expr | None] | None = None


class _WriterActor:
    """The default of an ``actor`` column: the actor of the handle that writes the row."""

    def __repr__(self) -> str:
        return "WRITER_ACTOR"


WRITER_ACTOR = _WriterActor()

#: a review's journal row (reference 2.1): a proposal is the engine's staged ingest, a
#: verdict that closes it its ``memory_ratify`` (a rejection too, named in the reason)
_REVIEW_PROPOSED = pl.col("verdict") == "proposed"
_REVIEW_ACTION = (pl.when(_REVIEW_PROPOSED).then(pl.lit("memory_ingest"))
                  .otherwise(pl.lit("memory_ratify")))
_REVIEW_REASON = pl.when(_REVIEW_PROPOSED).then(pl.lit("staged proposed")).otherwise(
    pl.concat_str([pl.lit("verdict="), pl.col("verdict"),
                   pl.when(pl.col("reason").is_not_null())
                   .then(pl.lit(" ") + pl.col("reason")).otherwise(pl.lit(""))]))


#: an epistemics row's journal reason (nMEMORY 0.3.0 audits an ingest's epistemic sidecar
#: as ``memory_classify`` naming exactly the fields the row sets, e.g.
#: ``epistemics evidence_state=observed +proof_hint +stale_if via-ingest``)
_EPISTEMICS_REASON = pl.concat_str([
    pl.lit("epistemics"),
    pl.when(pl.col("evidence_state").is_not_null())
    .then(pl.lit(" evidence_state=") + pl.col("evidence_state")).otherwise(pl.lit("")),
    pl.when(pl.col("proof_hint").is_not_null()).then(pl.lit(" +proof_hint"))
    .otherwise(pl.lit("")),
    pl.when(pl.col("stale_if").is_not_null()).then(pl.lit(" +stale_if")).otherwise(pl.lit("")),
    pl.lit(" via-ingest"),
])


MAX_RECALL_COUNT = 2**31 - 1  # per row: recall_count sums can never overflow int64

RULES: dict[str, TableRules] = {
    "relations": TableRules(
        defaults={"origin": "manual"}, capsule_refs=("from_id", "to_id"),
        dedupe=("kind", "from_id", "to_id"),
        journal=("memory_relate", "from_id",
                 pl.concat_str([pl.col("kind"), pl.col("to_id")], separator=" ")),
    ),
    "forgets": TableRules(
        defaults={"mode": "tombstone", "reason": None}, capsule_refs=("capsule_id",),
        journal=("memory_forget", "capsule_id", pl.col("reason")),
    ),
    "recalls": TableRules(defaults={"count": 1}, capsule_refs=("capsule_id",)),
    "classifications": TableRules(
        defaults={"scope": "project"}, capsule_refs=("capsule_id",),
        journal=("memory_classify", "capsule_id", pl.lit("kind=") + pl.col("kind")),
    ),
    "tiers": TableRules(
        capsule_refs=("capsule_id",),
        journal=("memory_tier", "capsule_id", pl.lit("tier=") + pl.col("tier")),
    ),
    "recall_misses": TableRules(nonblank=("term",)),
    "lane_overrides": TableRules(),
    "corroborations": TableRules(
        defaults={"source": "git", "detail": None}, capsule_refs=("capsule_id",),
        nonblank=("ref",),
    ),
    "source_cursors": TableRules(nonblank=("source_key", "cursor")),
    "summaries": TableRules(nonblank=("conversation_id", "summary")),
    "reviews": TableRules(
        defaults={"reason": None, "actor": WRITER_ACTOR}, capsule_refs=("capsule_id",),
        accepts_tombstoned=False, optional_text=("reason",),
        journal=(_REVIEW_ACTION, "capsule_id", _REVIEW_REASON),
    ),
    "pins": TableRules(
        defaults={"pinned": True, "reason": None, "actor": WRITER_ACTOR},
        capsule_refs=("capsule_id",), accepts_tombstoned=False, optional_text=("reason",),
        journal=("memory_pin", "capsule_id", pl.col("reason")),
    ),
    # a receipt per recall (nMEMORY 0.3.0): usage telemetry, not journaled, like recalls;
    # ``id`` defaults to the store's next ``rcpt-<n>`` and ``outcome`` to what the returned
    # ids say (grounded when any, else abstain); returned ids may name forgotten capsules
    # (the recall happened), unknown ones are refused
    "recall_receipts": TableRules(
        defaults={"id": None, "outcome": None, "lane": None, "project_id": None,
                  "project_prefix": None, "session_id": None},
        optional_text=("project_id", "project_prefix"),
    ),
    # when a fact was true: an instant or an interval (latest by seq per capsule)
    "event_times": TableRules(
        defaults={"event_at": None, "event_from": None, "event_to": None},
        capsule_refs=("capsule_id",),
    ),
    # the epistemic sidecar: merged per field (latest non-null by seq), audited like the
    # engine audits it at ingest
    "epistemics": TableRules(
        defaults={"evidence_state": None, "proof_hint": None, "stale_if": None},
        capsule_refs=("capsule_id",), optional_text=("proof_hint", "stale_if"),
        journal=("memory_classify", "capsule_id", _EPISTEMICS_REASON),
    ),
    # a recall synonym the caller taught (nMEMORY's memory_alias): both sides folded, never
    # the same word, the pair stored once (teaching it again writes nothing); journaled as
    # the engine audits it, naming the term and the alias as the caller spelled them
    "recall_aliases": TableRules(
        nonblank=("term", "alias"), dedupe=("term", "alias"),
        journal=(ALIAS_ACTION, ALIAS_GIVEN[0], pl.lit("alias=") + pl.col(ALIAS_GIVEN[1])),
    ),
}
