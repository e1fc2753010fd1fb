"""Constants and column maps shared by the nMEMORY importer's modules."""

from __future__ import annotations

import polars as pl

#: the nMEMORY schema versions this importer reads, with the releases that write them:
#: 0.2.x creates stores at 20; 0.3.0 creates them at 21 and migrates every older store it
#: opens to 21 in place (the relations table rebuilt with a ninth kind, ``about``)
SCHEMA_VERSIONS: dict[int, str] = {20: "0.2.x", 21: "0.3.0"}
#: the newest schema version read
SCHEMA_VERSION = max(SCHEMA_VERSIONS)
#: the release whose first open migrates any older store to the newest version read
MIGRATING_RELEASE = SCHEMA_VERSIONS[SCHEMA_VERSION]
WATERMARK = "import:nmemory"
OPERATION = "import:nmemory"
SQLITE_HEADER = b"SQLite format 3\x00"
#: ``source`` of a capsule row whose tombstone kept no provenance source.
TOMBSTONE_SOURCE = "nmemory-tombstone"
DEFAULT_BATCH_ROWS = 100_000
_IN_CHUNK = 900  # host parameters per IN (...) list

_S, _I = pl.String(), pl.Int64()
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
#: the side tables schema v21 (nMEMORY 0.3.0) adds to what is read: recall receipts, event
#: times and the epistemic sidecar (a v20 file holds them too, but the engine before 0.3.0
#: never exposed them, so they are read from v21 files only)
V21_TABLES: dict[str, dict[str, pl.DataType]] = {
    "recall_receipts": {"seq": _I, "id": _S, "terms": _S, "returned_ids": _S, "outcome": _S,
                        "lane": _S, "project_id": _S, "at": _S},
    "event_time": {"capsule_id": _S, "event_at": _S, "at": _S},
    "epistemics": {"capsule_id": _S, "evidence_state": _S, "proof_hint": _S, "stale_if": _S,
                   "at": _S},
}
#: columns read when the file has them (a receipt's prefix and session, an event interval)
OPTIONAL_COLUMNS: dict[str, dict[str, pl.DataType]] = {
    "recall_receipts": {"project_prefix": _S, "session_id": _S},
    "event_time": {"event_from": _S, "event_to": _S},
}


#: side tables read at every version when the file holds them (a file without one simply
#: has none of its rows): the taught recall aliases (``memory_alias``, whose table the
#: engine has kept since its schema v3 and calls droppable: it recreates it empty)
OPTIONAL_TABLES: dict[str, dict[str, pl.DataType]] = {
    "synonyms": {"term": _S, "alias": _S, "at": _S},
}


def tables_for(version: int) -> dict[str, dict[str, pl.DataType]]:
    """The source tables read from a file of schema ``version`` (the optional ones too)."""
    return {**SOURCE_TABLES, **(V21_TABLES if version >= 21 else {}), **OPTIONAL_TABLES}


def seq_tables_for(version: int) -> tuple[str, ...]:
    """The append-only tables read from a file of schema ``version``."""
    return _SEQ_TABLES + (("recall_receipts",) if version >= 21 else ())


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
    "recall_receipts": ("seq", "id", "terms", "returned_ids", "outcome", "lane", "at"),
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


