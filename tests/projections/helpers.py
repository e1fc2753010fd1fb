"""Helpers for projection tests: building stores through the public API, and an
independent (pure Python) model of the session row and its hash."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable

import polars as pl

import memframe as mf
from memframe.projections import session_rows

T0 = dt.datetime(2026, 7, 23, 12, 0, 0, tzinfo=dt.UTC)


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def caps(rows: Iterable[tuple[str | None, float]], tag: str = "m") -> list[dict]:
    """(conversation_id, seconds after T0) -> capsule rows with unique content."""
    out = []
    for i, (conv, secs) in enumerate(rows):
        row = {"content": f"{tag}-{i}-{conv}-{secs}", "source": "conversation",
               "anchor": f"a{i}", "created_at": at(secs)}
        if conv is not None:
            row["conversation_id"] = conv
        out.append(row)
    return out


def stored_rows(store: mf.Store | mf.StoreView) -> pl.DataFrame:
    """The projection's current rows (one per conversation), sorted by conversation."""
    rows, _ = session_rows.read_all(store.pinned())
    return rows.sort("conversation_id")


def rfc3339_ns(value: dt.datetime) -> str:
    text = value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if value.microsecond:
        text += "." + f"{value.microsecond * 1000:09d}".rstrip("0")
    return text + "Z"


def model_rows(store: mf.Store) -> list[dict]:
    """Session rows computed in plain Python from the canonical tables (independent model)."""
    capsules = store.table("capsules").collect().to_dicts()
    summaries = store.table("summaries").collect().sort("seq").to_dicts()
    rows: dict[str, dict] = {}
    for c in capsules:
        conv = c["conversation_id"]
        if conv is None:
            continue
        r = rows.setdefault(conv, {"conversation_id": conv, "members": [], "summary": None})
        r["members"].append(c)
    for s in summaries:
        r = rows.setdefault(s["conversation_id"], {"conversation_id": s["conversation_id"],
                                                    "members": [], "summary": None})
        r["summary"] = s["summary"]
    out = []
    for conv in sorted(rows):
        r = rows[conv]
        m = r["members"]
        last = max(m, key=lambda c: (c["created_at"], int(c["id"][4:]))) if m else None
        row = {
            "conversation_id": conv,
            "first_at": min(c["created_at"] for c in m) if m else None,
            "last_at": max(c["created_at"] for c in m) if m else None,
            "memory_count": len(m),
            "content_chars": sum(c["content_chars"] for c in m),
            "last_member_id": last["id"] if last else None,
            "summary": r["summary"],
        }
        line = json.dumps({k: (rfc3339_ns(v) if isinstance(v, dt.datetime) else v)
                           for k, v in row.items()}, ensure_ascii=False, separators=(",", ":"))
        row["hash"] = hashlib.sha256(line.encode()).hexdigest()
        out.append(row)
    return out


def bulk_capsules(n_convs: int, per_conv: int, *, offset: int = 0, tag: str = "bulk") -> pl.DataFrame:
    """A capsule frame: ``n_convs`` conversations (ids ``conv-<8 digits>`` from ``offset``)
    of ``per_conv`` members each, one second apart."""
    n = n_convs * per_conv
    return (
        pl.DataFrame({"i": pl.int_range(0, n, eager=True)})
        .select(
            pl.format("{}-{}", pl.lit(tag), pl.col("i")).alias("content"),
            pl.lit("conversation").alias("source"),
            pl.lit("bulk").alias("anchor"),
            pl.format("conv-{}", (pl.col("i") // per_conv + offset).cast(pl.String)
                      .str.zfill(8)).alias("conversation_id"),
            (pl.lit(T0) + pl.duration(seconds=pl.col("i"))).alias("created_at"),
        )
    )
