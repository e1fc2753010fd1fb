"""Per-handle lookup state the write verbs need, kept current incrementally and lazily.

A writer must know, at the generation it commits against, which contents are stored
(idempotent ingest), which edges exist, which capsules are forgotten or absorbed and
which sessions are open. Re-reading whole tables for that on every commit would make a
commit's cost grow with the store, so a handle keeps this state and, when the log
advances, reads only the rows whose ``seq`` is above what it has already folded. Each
piece is loaded on first use, so a commit pays only for the lookups its verbs make.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import polars as pl

from memframe import schema as S
from memframe._scalars import as_int
from memframe.errors import MemframeError
from memframe.store import tables
from memframe.store.log import Part, Snapshot
from memframe.store.tables import constant

_TAIL_LIMIT = 50_000  # keys kept in Python sets before folding into the sorted frames
_TAIL_PROBES = 1_024  # lookups answered from the hash tail one by one (more: one join)

# each piece of write-side state: the table it folds, and the columns it reads
_PIECES = {"hashes": "capsules", "edges": "relations", "forgets": "forgets",
           "absorbed": "processing", "sessions": "brackets", "aliases": "recall_aliases"}
_COLUMNS = {"hashes": ["id", "source_hash"], "edges": ["kind", "from_id", "to_id"],
            "forgets": ["capsule_id", "mode"], "absorbed": ["capsule_id"],
            "sessions": ["session_id", "event", "project_id"], "aliases": ["term", "alias"]}

_EDGE_KEY = pl.concat_str([pl.col("kind"), pl.col("from_id"), pl.col("to_id")], separator="\x00")
#: a taught alias's key: the folded (term, alias) pair, the term's length first (any text
#: may be taught, so no separator alone could keep two pairs apart)
ALIAS_KEY = pl.concat_str([pl.col("term").str.len_bytes().cast(pl.String), pl.lit(":"),
                           pl.col("term"), pl.col("alias")])


def _prefix_expr(column: str) -> pl.Expr:
    # 60 bits of the content hash: enough to find candidates; hits are confirmed exactly
    return pl.col(column).str.slice(0, 15).str.to_integer(base=16)


class _SortedKeys:
    """An exact membership set: a sorted Polars column plus a small Python tail."""

    def __init__(self) -> None:
        self.base = pl.Series("key", [], dtype=pl.String)
        self.tail: set[str] = set()

    def add(self, keys: pl.Series) -> None:
        if keys.len() > _TAIL_LIMIT or len(self.tail) + keys.len() > _TAIL_LIMIT:
            merged = pl.concat([self.base, pl.Series("key", sorted(self.tail), dtype=pl.String),
                                keys.rename("key")])
            self.base = merged.unique().sort()
            self.tail = set()
        else:
            self.tail.update(keys.to_list())

    def contains(self, keys: pl.Series) -> list[bool]:
        found = [False] * keys.len()
        if self.base.len():
            at = self.base.search_sorted(keys, side="left").clip(0, self.base.len() - 1)
            found = (self.base.gather(at) == keys).to_list()
        if self.tail:
            found = [f or k in self.tail for f, k in zip(found, keys.to_list(), strict=True)]
        return found


class Indexes:
    """Write-side state of one store handle (not shared between processes)."""

    def __init__(self, root: Path):
        self.root = root
        self.covered: dict[str, int] = {}
        self._snapshot: Snapshot | None = None
        self._hash_base = pl.DataFrame(schema={"prefix": pl.Int64, "num": pl.Int64})
        # the recent hashes: prefix -> capsule numbers (a commit adds its own in O(rows),
        # never copying the tail; folded into the sorted base past _TAIL_LIMIT)
        self._hash_tail: dict[int, list[int]] = {}
        self._hash_tail_rows = 0
        self._edges = _SortedKeys()
        self._aliases = _SortedKeys()
        self._forgets: dict[str, str] = {}
        self._absorbed: set[str] = set()
        self._sessions: dict[str, list] = {}
        self._synced: dict[str, int] = {}  # piece -> generation it is current with

    # -- keeping current ------------------------------------------------------------------
    def refresh(self, snap: Snapshot) -> None:
        """Follow the log to ``snap``; the pieces catch up when next asked."""
        if self._snapshot is not None and snap.generation < self._snapshot.generation:
            raise RuntimeError("write indexes never move backwards")  # a bug, not user error
        self._snapshot = snap

    def _sync(self, piece: str) -> None:
        """Bring one piece up to the snapshot, once per generation (only new rows are read)."""
        snap = self._snapshot
        assert snap is not None, "refresh(snapshot) before lookups"
        if self._synced.get(piece) == snap.generation:
            return
        rows = self._new_rows(_PIECES[piece], _COLUMNS[piece])
        if rows is not None:
            getattr(self, f"_fold_{piece}")(rows)
        self._synced[piece] = snap.generation

    def _new_rows(self, table: str, columns: list[str]) -> pl.DataFrame | None:
        """The rows of ``table`` above those folded already, in ``seq`` order; None when
        there are none. A handle catches up after every other writer's commit, and most
        (an erasure, a compaction, another table's rows) add none it folds: no frame then."""
        snap = self._snapshot
        assert snap is not None, "refresh(snapshot) before lookups"
        done = self.covered.get(table, 0)
        parts = [p for p in snap.parts(table) if (p.seq_hi or 0) > done]
        top = max((p.seq_hi or 0 for p in snap.parts(table)), default=0)
        if not parts:
            self.covered[table] = max(done, top)
            return None
        frame = tables.read(self.root, parts, S.table_schema(table), [*columns, "seq"])
        self.covered[table] = max(done, top)  # (only once read: a failed read is retried)
        fresh = frame.filter(pl.col("seq") > done).sort("seq")
        return fresh if fresh.height else None

    def learn_own(self, parent: Snapshot, generation: int,
                  frames: dict[str, list[pl.DataFrame]],
                  written_early: Collection[str] = ()) -> None:
        """Fold the rows this handle itself just landed as ``generation`` (on ``parent``),
        so its next commit need not read them back. A piece loaded already but not current
        with ``parent`` (the commit was rebased past others) first reads the rows those
        others added (what its next lookup would read anyway), so no row of theirs is
        skipped; the tables of which the commit wrote rows early are read back when next
        needed instead."""
        for piece, table in _PIECES.items():
            if (piece not in self._synced or self.covered.get(table) is None
                    or table in written_early):
                continue
            if self._synced[piece] != parent.generation:
                if self._snapshot is not None and self._snapshot.generation > parent.generation:
                    continue  # moved past it already (a commit nested in this one)
                try:
                    self.refresh(parent)
                    self._sync(piece)
                except (OSError, MemframeError, pl.exceptions.PolarsError):
                    continue  # landed all the same: the next lookup reads them again
            own = frames.get(table, [])
            if own:
                rows = pl.concat([f.select(_COLUMNS[piece] + ["seq"]) for f in own])
                getattr(self, f"_fold_{piece}")(rows)
                self.covered[table] = max(self.covered[table], as_int(rows["seq"].max()))
            self._synced[piece] = generation

    def _fold_hashes(self, rows: pl.DataFrame) -> None:
        fresh = rows.select(
            _prefix_expr("source_hash").alias("prefix"),
            pl.col("id").str.slice(4).cast(pl.Int64).alias("num"),
        )
        if fresh.height > _TAIL_LIMIT or self._hash_tail_rows + fresh.height > _TAIL_LIMIT:
            self._hash_base = pl.concat([self._hash_base, self._tail_frame(), fresh]
                                        ).sort("prefix")
            self._hash_tail, self._hash_tail_rows = {}, 0
        elif fresh.height:
            for prefix, num in fresh.iter_rows():
                self._hash_tail.setdefault(prefix, []).append(num)
            self._hash_tail_rows += fresh.height

    def _tail_frame(self) -> pl.DataFrame:
        pairs = [(p, n) for p, nums in self._hash_tail.items() for n in nums]
        return pl.DataFrame(pairs, schema={"prefix": pl.Int64, "num": pl.Int64}, orient="row")

    def _fold_edges(self, fresh: pl.DataFrame) -> None:
        if fresh.height:
            self._edges.add(fresh.select(_EDGE_KEY.alias("key"))["key"])

    def _fold_aliases(self, fresh: pl.DataFrame) -> None:
        if fresh.height:
            self._aliases.add(fresh.select(ALIAS_KEY.alias("key"))["key"])

    def _fold_forgets(self, fresh: pl.DataFrame) -> None:
        for cid, mode in fresh.select("capsule_id", "mode").iter_rows():
            if self._forgets.get(cid) not in ("redact", "purge"):
                self._forgets[cid] = mode

    def _fold_absorbed(self, fresh: pl.DataFrame) -> None:
        self._absorbed.update(fresh["capsule_id"])

    def _fold_sessions(self, fresh: pl.DataFrame) -> None:
        for sid, event, project in fresh.select("session_id", "event", "project_id").iter_rows():
            state = self._sessions.setdefault(sid, [project, False])
            if event == "finish":
                state[1] = True

    # -- lookups --------------------------------------------------------------------------
    def forget_mode(self, capsule_id: str) -> str | None:
        self._sync("forgets")
        return self._forgets.get(capsule_id)

    def relation_exists(self, key: tuple[str, str, str]) -> bool:
        return self.relations_exist(pl.DataFrame([key], schema=["kind", "from_id", "to_id"],
                                                 orient="row"))[0]

    def relations_exist(self, edges: pl.DataFrame) -> list[bool]:
        """For each (kind, from_id, to_id) row, whether the store already holds that edge."""
        self._sync("edges")
        return self._edges.contains(edges.select(_EDGE_KEY.alias("key"))["key"])

    def aliases_exist(self, pairs: pl.DataFrame) -> list[bool]:
        """For each folded (term, alias) row, whether the store already holds that alias."""
        self._sync("aliases")
        return self._aliases.contains(pairs.select(ALIAS_KEY.alias("key"))["key"])

    def session(self, sid: str) -> list | None:
        self._sync("sessions")
        state = self._sessions.get(sid)
        return None if state is None else list(state)

    def is_absorbed(self, capsule_id: str) -> bool:
        self._sync("absorbed")
        return capsule_id in self._absorbed

    def capsule_part(self, snap: Snapshot, number: int) -> Part:
        """The partition holding the ``number``-th capsule (ids are dense in seq order)."""
        seen = 0
        for part in snap.parts("capsules"):
            if seen < number <= seen + part.rows:
                return part
            seen += part.rows
        raise LookupError(f"cap-{number} is beyond this generation's {seen} capsules")

    def capsules_for_hashes(self, hashes: pl.Series) -> pl.Series:
        """The stored capsule id for each content hash, or null (exact: prefixes confirmed)."""
        snap = self._snapshot
        none = constant(None, hashes.len(), pl.String).alias("found")
        if snap is None or hashes.len() == 0:
            return none
        self._sync("hashes")
        if self._hash_base.height == 0 and not self._hash_tail:
            return none  # nothing stored yet (a first bulk load)
        query = hashes.to_frame("h").with_row_index("row").with_columns(
            _prefix_expr("h").alias("prefix"))
        found: list[pl.DataFrame] = []
        base = self._hash_base
        if base.height:  # binary search: a lookup costs log(store), not a pass over it
            starts = base["prefix"].search_sorted(query["prefix"], side="left")
            width = base["prefix"].search_sorted(query["prefix"], side="right") - starts
            hit = width > 0
            if hit.any():
                # one candidate per hit, or a few where stored contents share a prefix
                at = pl.DataFrame({"row": query["row"].filter(hit), "start": starts.filter(hit),
                                   "width": width.filter(hit)}).select(
                    "row", pl.int_ranges("start", pl.col("start") + pl.col("width")).alias("at")
                ).explode("at")
                found.append(at.select("row", base["num"].gather(at["at"]).alias("num")))
        if self._hash_tail and query.height <= _TAIL_PROBES:  # a few lookups: by key
            tail = self._hash_tail
            pairs = [(row, n) for row, prefix in query.select("row", "prefix").iter_rows()
                     for n in tail.get(prefix, ())]
            found.append(pl.DataFrame(pairs, schema={"row": query.schema["row"],
                                                     "num": pl.Int64}, orient="row"))
        elif self._hash_tail:
            found.append(query.join(self._tail_frame(), on="prefix", how="inner")
                         .select("row", "num"))
        candidates = pl.concat(found) if found else None
        if candidates is None or candidates.height == 0:
            return none
        candidates = candidates.join(query.select("row", "h"), on="row", how="inner")
        numbers = candidates["num"].unique().sort().to_list()
        stored = self._stored_hashes(snap, numbers)
        confirmed = candidates.join(
            pl.DataFrame({"num": numbers, "stored": [stored[n] for n in numbers]},
                         schema={"num": pl.Int64, "stored": pl.String}),
            on="num", how="inner",
        ).filter(pl.col("stored") == pl.col("h")).group_by("row").agg(pl.col("num").min())
        return query.select("row").join(confirmed, on="row", how="left", maintain_order="left"
                                        ).select(pl.format("cap-{}", "num").alias("found"))["found"]

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
