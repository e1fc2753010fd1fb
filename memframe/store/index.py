"""Per-handle lookup state the write verbs need, kept current incrementally.

A writer must know, at the generation it commits against, which contents are stored
(idempotent ingest), which edges exist, which capsules are forgotten or absorbed and
which sessions are open. Re-reading whole tables for that on every commit would make a
commit's cost grow with the store, so a handle keeps this state and, when the log
advances, reads only the rows whose ``seq`` is above what it has already folded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from memframe import schema as S
from memframe.store import tables
from memframe.store.log import Part, Snapshot

_TAIL_LIMIT = 200_000  # hash prefixes kept in a dict before folding into the sorted frame


def _edge_key(kind: str, from_id: str, to_id: str) -> bytes:
    return hashlib.blake2b(f"{kind}\x00{from_id}\x00{to_id}".encode(), digest_size=12).digest()


def _prefix(source_hash: str) -> int:
    return int(source_hash[:15], 16)


class Indexes:
    """Write-side state of one store handle (not shared between processes)."""

    def __init__(self, root: Path):
        self.root = root
        self.covered: dict[str, int] = {}
        self.generation = -1
        self._hash_base = pl.DataFrame(schema={"prefix": pl.Int64, "num": pl.Int64})
        self._hash_tail: dict[int, list[int]] = {}
        self._edges: set[bytes] = set()
        self._forgets: dict[str, str] = {}
        self._absorbed: set[str] = set()
        self._sessions: dict[str, list] = {}
        self._snapshot: Snapshot | None = None

    # -- keeping current ------------------------------------------------------------------
    def _new_rows(self, snap: Snapshot, table: str, columns: list[str]) -> pl.DataFrame:
        done = self.covered.get(table, 0)
        parts = [p for p in snap.parts(table) if (p.seq_hi or 0) > done]
        frame = tables.read(self.root, parts, S.table_schema(table), [*columns, "seq"])
        frame = frame.filter(pl.col("seq") > done).sort("seq")
        top = max((p.seq_hi or 0 for p in snap.parts(table)), default=0)
        self.covered[table] = max(done, top)
        return frame

    def refresh(self, snap: Snapshot) -> None:
        if snap.generation == self.generation:
            return
        if snap.generation < self.generation:
            raise RuntimeError("write indexes never move backwards")  # a bug, not user error
        caps = self._new_rows(snap, "capsules", ["id", "source_hash"])
        if caps.height:
            fresh = caps.select(
                pl.col("source_hash").str.slice(0, 15).str.to_integer(base=16).alias("prefix"),
                pl.col("id").str.slice(4).cast(pl.Int64).alias("num"),
            )
            for p, n in fresh.iter_rows():
                self._hash_tail.setdefault(p, []).append(n)
            if len(self._hash_tail) > _TAIL_LIMIT:
                self._fold_tail()
        for kind, f, t in self._new_rows(snap, "relations", ["kind", "from_id", "to_id"]).select(
            "kind", "from_id", "to_id"
        ).iter_rows():
            self._edges.add(_edge_key(kind, f, t))
        for cid, mode in self._new_rows(snap, "forgets", ["capsule_id", "mode"]).select(
            "capsule_id", "mode"
        ).iter_rows():
            if self._forgets.get(cid) not in ("redact", "purge"):
                self._forgets[cid] = mode
        self._absorbed.update(self._new_rows(snap, "processing", ["capsule_id"])["capsule_id"])
        for sid, event, project in self._new_rows(
            snap, "brackets", ["session_id", "event", "project_id"]
        ).select("session_id", "event", "project_id").iter_rows():
            state = self._sessions.setdefault(sid, [project, False])
            if event == "finish":
                state[1] = True
        self.generation = snap.generation
        self._snapshot = snap

    def _fold_tail(self) -> None:
        rows = [(p, n) for p, ns in self._hash_tail.items() for n in ns]
        tail = pl.DataFrame(rows, schema={"prefix": pl.Int64, "num": pl.Int64}, orient="row")
        self._hash_base = pl.concat([self._hash_base, tail]).sort("prefix")
        self._hash_tail = {}

    # -- lookups --------------------------------------------------------------------------
    def forget_mode(self, capsule_id: str) -> str | None:
        return self._forgets.get(capsule_id)

    def relation_exists(self, key: tuple[str, str, str]) -> bool:
        return _edge_key(*key) in self._edges

    def session(self, sid: str) -> list | None:
        return self._sessions.get(sid)

    def is_absorbed(self, capsule_id: str) -> bool:
        return capsule_id in self._absorbed

    def capsule_part(self, snap: Snapshot, number: int) -> Part:
        """The partition holding the ``number``-th capsule (ids are dense in seq order)."""
        seen = 0
        for part in snap.parts("capsules"):
            if seen < number <= seen + part.rows:
                return part
            seen += part.rows
        raise LookupError(f"cap-{number} is beyond this generation's {seen} capsules")

    def capsules_for_hashes(self, hashes: Sequence[str]) -> list[str | None]:
        """The stored capsule id for each content hash, or None (exact: prefixes confirmed)."""
        snap = self._snapshot
        out: list[str | None] = [None] * len(hashes)
        if snap is None or not hashes:
            return out
        prefixes = [_prefix(h) for h in hashes]
        candidates: dict[int, list[int]] = {}
        base = self._hash_base
        if base.height:
            query = pl.Series(prefixes, dtype=pl.Int64)
            starts = base["prefix"].search_sorted(query, side="left")
            ends = base["prefix"].search_sorted(query, side="right")
            nums = base["num"]
            for i, (s, e) in enumerate(zip(starts.to_list(), ends.to_list(), strict=True)):
                if e > s:
                    candidates.setdefault(i, []).extend(nums[s:e].to_list())
        for i, p in enumerate(prefixes):
            if p in self._hash_tail:
                candidates.setdefault(i, []).extend(self._hash_tail[p])
        if not candidates:
            return out
        stored = self._stored_hashes(snap, sorted({n for ns in candidates.values() for n in ns}))
        for i, nums in candidates.items():
            for n in sorted(nums):
                if stored.get(n) == hashes[i]:
                    out[i] = f"cap-{n}"
                    break
        return out

    def _stored_hashes(self, snap: Snapshot, numbers: list[int]) -> dict[int, str]:
        """source_hash of the given capsule numbers, reading only the parts that hold them."""
        by_part: dict[str, tuple[Part, int, list[int]]] = {}
        seen = 0
        wanted = iter(numbers)
        n = next(wanted, None)
        for part in snap.parts("capsules"):
            while n is not None and seen < n <= seen + part.rows:
                by_part.setdefault(part.path, (part, seen, []))[2].append(n)
                n = next(wanted, None)
            seen += part.rows
        out: dict[int, str] = {}
        for part, offset, nums in by_part.values():
            column = tables.read(self.root, [part], S.table_schema("capsules"), ["source_hash"])
            values = column["source_hash"]
            for num in nums:
                out[num] = values[num - offset - 1]
        return out
