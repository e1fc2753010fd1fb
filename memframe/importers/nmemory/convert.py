"""Row checks and conversions: source rows -> memframe canonical rows."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import polars as pl

from memframe import schema as S
from memframe.errors import (
    ImportSourceError,
)
from memframe.ids import SESSION_ID_RULE, capsule_number_expr, session_number_expr
from memframe.importers.nmemory.common import (
    _CANONICAL,
    _CAPSULE_V1,
    _FORGET_MODES,
    _HEX64,
    _IN_CHUNK,
    _RFC3339,
    _TIME_FORMAT,
    TOMBSTONE_SOURCE,
)
from memframe.importers.nmemory.source import (
    _Source,
)
from memframe.store import capture
from memframe.text import INSTANT_MAX, INSTANT_MIN, fold_expr, rfc3339

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
    kinds: dict[str, type | tuple[type, ...]] = {
        "content": str, "confidence": (int, float), "authority_class": str,
        "instruction_taint": bool, "provenance": dict, "freshness": dict, "scope": dict}
    for seq, cid, text in raw.select("seq", "id", "canonical_json").iter_rows():
        if text is None:
            continue
        try:
            value = json.loads(text)
        except RecursionError:
            return ImportSourceError(
                f"capsules row seq={seq} ({cid}): canonical_json nests deeper than Python's "
                f"parser can follow; a Capsule v1 object nests three levels (provenance, "
                f"freshness and scope hold text). The source is corrupt or hostile: fix or "
                f"remove that row in the nMEMORY file, then import again")
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


#: an id as the engine issues it: a prefix and a positive decimal number, nothing else
_ISSUED = r"^{}-[1-9][0-9]*$"


def _issued(ids: pl.Series, prefix: str, top: int | None = None,
            known: Sequence[str] | None = None) -> pl.Series:
    """Is each id one the source issued: ``<prefix>-<n>`` with ``n`` in 1..``top``, or one
    of ``known``?"""
    ok = ids.str.contains(_ISSUED.format(prefix)).fill_null(False)
    if top is not None:
        num = ids.str.strip_prefix(f"{prefix}-").cast(pl.Int64, strict=False)
        ok = ok & (num <= top).fill_null(False)
    if known is not None:
        ok = ok & ids.is_in(list(known)).fill_null(False)
    return ok


def _relation_rows(rel: pl.DataFrame, notes: _Notes, kinds: Sequence[str], capsules: int,
                   outcomes: Sequence[str]) -> pl.DataFrame:
    """Source relation rows (read in the store's order) -> memframe relation rows.

    ``kinds`` are the kinds the source's schema version admits, ``capsules`` how many
    capsules the source issued (cap-1..cap-<capsules>) and ``outcomes`` the outcome ids it
    issued (a ``falsifies`` edge may come from one). An endpoint the engine's relate verb
    could not have written is refused, naming the row; a repeated edge (a source whose
    primary key was lost) is kept once, first row first, as the key keeps it.
    """
    t = "relations"
    rel = rel.with_columns(
        pl.format("{} {} -> {}", pl.col("kind").fill_null("NULL"),
                  pl.col("from_id").fill_null("NULL"), pl.col("to_id").fill_null("NULL"))
        .alias("edge"))
    k = "edge"
    _vocab(rel, "kind", kinds, t, k, "relation kind")
    rel = rel.with_columns(pl.col("origin").fill_null("manual"))
    _vocab(rel, "origin", S.RELATION_ORIGINS, t, k, "relation origin")
    _fail(t, k, rel, rel["from_id"].is_null() | rel["to_id"].is_null(), "an endpoint is NULL")
    from_ok = _issued(rel["from_id"], "cap", capsules) | (
        (rel["kind"] == "falsifies") & _issued(rel["from_id"], "out", known=outcomes))
    _fail(t, k, rel, ~from_ok | ~_issued(rel["to_id"], "cap", capsules),
          f"an endpoint is not an id the source issued (capsules run cap-1..cap-{capsules}; "
          f"only a falsifies edge may come from an outcome out-<n> of its outcomes table); "
          f"the engine's relate verb never writes such an edge, so the source is corrupt")
    _fail(t, k, rel, rel["from_id"] == rel["to_id"],
          "an edge from a capsule to itself, which the engine's relate verb refuses; the "
          "source is corrupt")
    at = _times(rel, "at", t, k, notes=notes)
    out = rel.select(at.alias("at"), "kind", "from_id", "to_id", "origin")
    unique = out.unique(["kind", "from_id", "to_id"], keep="first", maintain_order=True)
    if unique.height != out.height:
        notes.add(f"relations: {out.height - unique.height} repeated edge row(s) imported once "
                  f"(the engine's key (kind, from_id, to_id) keeps the first)")
    return unique


def _recall_rows(usage: pl.DataFrame, notes: _Notes) -> pl.DataFrame:
    t, k = "usage", "capsule_id"
    _fail(t, k, usage, usage["recall_count"].is_null() | (usage["recall_count"] < 0),
          "recall_count is NULL or negative")
    # bounded as store.record_recall bounds a batch, so recall_count sums never overflow
    _fail(t, k, usage, usage["recall_count"] > capture.MAX_RECALL_COUNT,
          f"recall_count is beyond {capture.MAX_RECALL_COUNT:,}, the most memframe counts "
          f"for one capsule (a larger count would overflow the sums the digest ranks by); "
          f"the source is corrupt")
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
    # the package's one session-id parser: null for anything not sess-<n>
    return pl.select(session_number_expr(pl.lit(ids))).to_series()


def _sessions(sessions: pl.DataFrame, notes: _Notes) -> pl.DataFrame:
    """Checked source sessions with parsed instants (session_id, start, finish, summary)."""
    t, k = "sessions", "session_id"
    num = _session_number(sessions["session_id"])
    _fail(t, k, sessions, num.is_null(), SESSION_ID_RULE)
    start = _times(sessions, "started_at", t, k, notes=notes)
    finish = _times(sessions, "finished_at", t, k, nullable=True, notes=notes)
    return sessions.select("session_id", start.alias("start"), finish.alias("finish"), "summary")


def _bracket_rows(sessions: pl.DataFrame, projects: Mapping[str, str],
                  which: str = "both") -> pl.DataFrame:
    """Start and/or finish bracket rows of parsed sessions.

    A finished session's summary goes on its finish row, an open one's on its start row.
    """
    # a session that holds no capsule has no project in the source: none is invented
    project = pl.col("session_id").replace_strict(
        dict(projects), default=None, return_dtype=pl.String)
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


def _json_lists(rows: pl.DataFrame, column: str, t: str, k: str) -> pl.Series:
    """A TEXT column of JSON arrays of strings as a list column, refusing anything else."""
    try:
        out = rows[column].str.json_decode(pl.List(pl.String))
    except pl.exceptions.PolarsError:
        out = pl.Series(column, [_json_list(v) for v in rows[column].to_list()],
                        dtype=pl.List(pl.String))
    _fail(t, k, rows, out.is_null() | out.list.eval(pl.element().is_null()).list.any(),
          f"{column} is not a JSON array of strings")
    return out


def _json_list(text: str | None) -> list[str] | None:
    try:
        value = json.loads(text) if text is not None else None
    except ValueError:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return value


def _receipt_rows(rows: pl.DataFrame, notes: _Notes) -> pl.DataFrame:
    t, k = "recall_receipts", "seq"
    _fail(t, k, rows, ~rows["id"].str.contains(S.RECEIPT_PATTERN), "id is not rcpt-<n>")
    _vocab(rows, "outcome", S.RECEIPT_OUTCOMES, t, k, "receipt outcome")
    _vocab(rows, "lane", S.RECALL_LANES, t, k, "recall lane")
    terms = _json_lists(rows, "terms", t, k)
    returned = _json_lists(rows, "returned_ids", t, k)
    _fail(t, k, rows, terms.list.len() == 0, "terms is an empty array")
    _fail(t, k, rows, (rows["outcome"] == "grounded") & (returned.list.len() == 0),
          "outcome grounded with no returned id")
    at = _times(rows, "at", t, k, notes=notes)
    extra = {c: rows[c] if c in rows.columns else pl.Series(c, [None] * rows.height, pl.String)
             for c in ("project_prefix", "session_id")}
    return pl.DataFrame({"at": at, "id": rows["id"], "terms": terms, "returned_ids": returned,
                         "outcome": rows["outcome"], "lane": rows["lane"],
                         "project_id": rows["project_id"], **extra})


def _check_returned_ids(rows: pl.DataFrame, capsules: int) -> None:
    flat = rows.select("id", pl.col("returned_ids")).explode("returned_ids").drop_nulls()
    num = flat.select(capsule_number_expr("returned_ids")).to_series()
    _fail("recall_receipts", "id", flat, num.is_null() | (num > capsules),
          f"a returned id names no capsule of the source (capsules run cap-1..cap-{capsules})")


def _keyed_refs(table: str, rows: pl.DataFrame, capsules: int) -> None:
    num = rows.select(capsule_number_expr("capsule_id")).to_series()
    _fail(table, "capsule_id", rows, num.is_null() | (num > capsules),
          f"names no capsule of the source (capsules run cap-1..cap-{capsules})")


def _event_time_rows(rows: pl.DataFrame, notes: _Notes, capsules: int) -> pl.DataFrame:
    t, k = "event_time", "capsule_id"
    _keyed_refs(t, rows, capsules)
    out = {"at": _times(rows, "at", t, k, notes=notes), "capsule_id": rows["capsule_id"]}
    for name in ("event_at", "event_from", "event_to"):
        out[name] = (_times(rows, name, t, k, nullable=True, notes=notes)
                     if name in rows.columns
                     else pl.Series(name, [None] * rows.height, S.TIMESTAMP))
    frame = pl.DataFrame(out)
    lo, hi, at = frame["event_from"], frame["event_to"], frame["event_at"]
    _fail(t, k, frame, at.is_null() & lo.is_null(), "holds no event time")
    _fail(t, k, frame, at.is_not_null() & (lo.is_not_null() | hi.is_not_null()),
          "holds an instant and an interval")
    _fail(t, k, frame, (hi < lo).fill_null(False), "event_to is before event_from")
    return frame


def _epistemic_rows(rows: pl.DataFrame, notes: _Notes, capsules: int) -> pl.DataFrame:
    t, k = "epistemics", "capsule_id"
    _keyed_refs(t, rows, capsules)
    state = rows["evidence_state"]
    _fail(t, k, rows, state.is_not_null() & ~state.is_in(S.EVIDENCE_STATES),
          f"unknown evidence_state; allowed: {', '.join(S.EVIDENCE_STATES)}")
    _fail(t, k, rows, state.is_null() & rows["proof_hint"].is_null()
          & rows["stale_if"].is_null(), "sets nothing")
    at = _times(rows, "at", t, k, notes=notes)
    return rows.select(at.alias("at"), "capsule_id", "evidence_state", "proof_hint", "stale_if")


def alias_rows(rows: pl.DataFrame, notes: _Notes) -> pl.DataFrame:
    """The engine's taught aliases (``synonyms``) as ``recall_aliases`` rows, in the order
    they were taught (instant, then term and alias). The engine folds both sides on
    write, refuses an empty side or a pair that folds to one word, and keys the table by
    the pair: a row breaking that is refused."""
    t, k = "synonyms", "term"
    for name in ("term", "alias"):
        _fail(t, k, rows, rows[name].is_null() | (rows[name] == ""), f"{name} is empty")
        _fail(t, k, rows, rows.select(fold_expr(pl.col(name)) != pl.col(name)).to_series(),
              f"{name} is not folded (the engine stores it trimmed, lowercased, Latin "
              f"accents folded)")
    _fail(t, k, rows, rows["term"] == rows["alias"], "alias equals its term")
    _fail(t, k, rows, rows.select(pl.struct("term", "alias").is_duplicated()).to_series(),
          "the (term, alias) pair repeats; the engine keys the table by it")
    at = _times(rows, "at", t, k, notes=notes)
    return rows.select(at.alias("at"), "term", "alias").sort("at", "term", "alias")


#: the v21 side tables keyed by capsule: source table -> (memframe table, conversion)
_KEYED_SIDECARS: dict[str, tuple[str, Callable[[pl.DataFrame, _Notes, int], pl.DataFrame]]] = {
    "event_time": ("event_times", _event_time_rows),
    "epistemics": ("epistemics", _epistemic_rows),
}


_SEQ_ROWS: dict[str, tuple[str, Callable[[pl.DataFrame, _Notes], pl.DataFrame]]] = {
    "recall_misses": ("recall_misses", _miss_rows),
    "lane_overrides": ("lane_overrides", _override_rows),
    "corroborations": ("corroborations", _corroboration_rows),
    "review_events": ("reviews", _review_rows),
    "pin_events": ("pins", _pin_rows),
    "recall_receipts": ("recall_receipts", _receipt_rows),
}
#: seq tables whose rows name a capsule of the source (checked against the capsule count)
_CAPSULE_TABLES = ("review_events", "pin_events")


def check_state_refs(table: str, rows: pl.DataFrame, capsules: int) -> None:
    """Refuse state rows (usage, classifications, tiers) naming an id the source never
    issued: the store would issue that id later, and the capsule would be born with
    that state (recalls, a kind, a tier)."""
    _fail(table, "capsule_id", rows, ~_issued(rows["capsule_id"], "cap", capsules),
          f"capsule_id names no capsule of the source (capsules run cap-1..cap-{capsules}); "
          f"the engine writes state only for capsules it issued, so the source is corrupt: "
          f"delete that row in the nMEMORY file, then import again")


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

    nMEMORY's sessions table holds no project; memframe's bracket rows carry one, null for
    a session that holds no capsule.
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


