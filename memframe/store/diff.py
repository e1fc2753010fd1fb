"""`StoreView.diff`: what changed in a store between two generations.

The canonical rows a generation range added are the rows whose ``seq`` lies above the
store's ``seq`` counter at the first generation and at or below it at the second (every
canonical table carries ``seq``; an erasure rewrites rows in place, keeping their ``seq``,
so it adds none). Only the partitions whose ``seq`` range meets that window are read.

The capsules whose state changed are the ones those rows name (a capsule row, or the
``capsule_id`` of a usage, forget, kind, tier, review or pin row, or either end of a
relation); their `capsule_state` rows are compared at both generations, so a capsule is
``added`` (no state row at the first) or ``changed`` (some column differs). Erased content
stays erased: the second generation's rows are read as they are now, and a purged
capsule's text at the first generation is read from files the purge replaced, which a
vacuum removes (then the diff refuses: the first generation is no longer readable).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import polars as pl

from memframe import budget, progress
from memframe.errors import InvalidInputError
from memframe.frames import records_json_pieces
from memframe.ids import capsule_number_expr
from memframe.schema import CANONICAL_TABLES
from memframe.state import KEY, SOURCE_KEY, capsule_state_of
from memframe.state import capsule_state as fold_capsule_state
from memframe.text import rfc3339

#: a pinned view of a store (`memframe.store.StoreView`; not imported: the store imports us)
StoreView = Any

__all__ = ["StoreDiff"]

#: the columns of a canonical row that name a capsule whose state it may change
CAPSULE_REFS: tuple[str, ...] = ("id", "capsule_id", "from_id", "to_id")

CAPSULES_SCHEMA = pl.Schema({"id": pl.String(), "change": pl.String(),
                             "fields": pl.List(pl.String()), "project_id": pl.String()})
FIELDS_SCHEMA = pl.Schema({"id": pl.String(), "field": pl.String(), "before": pl.String(),
                           "after": pl.String()})

#: capsules compared per chunk with no memory budget, and what one holds at both ends
#: (its state rows, their join, the values that differ; benchmarks/bench_scale.py)
COMPARE_CHUNK, COMPARE_BYTES = 1_000_000, 1_200

#: table -> how `StoreDiff.summary` words its rows
_WORDS: dict[str, str] = {
    "capsules": "ingested", "tiers": "re-tiered", "classifications": "reclassified",
    "recall_misses": "misses", "lane_overrides": "lane overrides",
    "recall_receipts": "recall receipts", "recall_aliases": "aliases taught",
}


class StoreDiff:
    """What changed between two generations of a store (`StoreView.diff`).

    Attributes:
        since, until: the two generations.
        capsules: one row per capsule that exists at ``until`` and was added or whose
            `capsule_state` row changed: ``id``, ``change`` (``"added"``, ``"changed"``),
            ``fields`` (the state columns that differ, sorted; empty when added),
            ``project_id``.
        fields: the long form: ``id``, ``field``, ``before``, ``after`` (values as JSON
            text, instants in RFC 3339; null where there is no value).
        summary: counts per kind of change, in words (kinds with none left out).
        rows_visited: Parquet rows read.
    """

    def __init__(self, since: StoreView, until: StoreView) -> None:
        self.since, self.until = since.generation, until.generation
        self._since, self._until = since, until
        self._lo = int(since.snapshot.counter("seq"))
        self._hi = int(until.snapshot.counter("seq"))
        self.rows_visited = 0
        added = {name: self._read(name) for name in CANONICAL_TABLES}
        self._added: dict[str, pl.LazyFrame | pl.DataFrame] = dict(added)
        ids = _named(added)
        # a chunk of capsules at a time (both ends folded, compared, let go): a long range
        # holds one chunk's state rows, not the store's
        size = budget.chunk_rows(default=COMPARE_CHUNK, per_row=COMPARE_BYTES,
                                 fixed=budget.BASE_BYTES, smallest=budget.SMALLEST_RANGE,
                                 what="the diff")
        found = []
        with progress.bar(-(-ids.len() // size), "diff", "chunk") as bar:
            for i in range(0, max(ids.len(), 1), size):
                found.append(self._compare(ids.slice(i, size)))
                bar.update()
        self.capsules = pl.concat([c for c, _f in found], how="vertical")
        self.fields = pl.concat([f for _c, f in found], how="vertical")
        self.summary = _summary(added)

    def _read(self, table: str) -> pl.LazyFrame:
        """The rows of ``table`` the range added (lazily), reading only the parts that can
        hold them."""
        view = self._until
        parts = [p for p in view.partitions(table)  # a part with no seq range is read
                 if (p.seq_hi is None or p.seq_hi > self._lo)
                 and (p.seq_lo is None or p.seq_lo <= self._hi)]
        if not parts:
            return view.table(table).head(0).collect().lazy()
        self.rows_visited += sum(p.rows for p in parts)
        return (view.scan_partitions(table, parts)
                .filter((pl.col("seq") > self._lo) & (pl.col("seq") <= self._hi)))

    def rows(self, table: str) -> pl.LazyFrame:
        """The canonical rows of ``table`` appended between the two generations (read on
        the first call, then kept; a part a vacuum removed before then is named by
        `GenerationNotFoundError`, as the diff itself would)."""
        if table not in self._added:
            raise InvalidInputError(f"no canonical table {table!r}; the tables are "
                                    f"{', '.join(self._added)}")
        frame = self._added[table]
        if isinstance(frame, pl.LazyFrame):
            try:
                frame = self._added[table] = frame.collect()
            except (OSError, pl.exceptions.ComputeError):
                # a vacuum removed a part since the diff was made: name it
                self._since.require_readable()
                self._until.require_readable()
                raise
        return frame.lazy()

    def _compare(self, ids: pl.Series) -> tuple[pl.DataFrame, pl.DataFrame]:
        if not ids.len():
            return pl.DataFrame(schema=CAPSULES_SCHEMA), pl.DataFrame(schema=FIELDS_SCHEMA)
        wanted = ids.implode()
        frames = []
        numbers = ids.str.slice(4).cast(pl.Int64).sort().to_list()
        views = (self._since, self._until)
        stored: dict[Any, pl.DataFrame] = {}  # the stored rows both ends keep, read once
        kept = [view.memory.kept_state_of(numbers, stored) for view in views]
        rewritten = _rewritten(*views, numbers)
        both = all(k is not None for k in kept)  # one way at both ends (see _kept_state)
        for view, found in zip(views, kept, strict=True):
            if both and found is not None:
                frame, visited = _kept_state(view, found, rewritten, wanted)
            else:
                frame, visited = _folded_state(view, wanted, numbers)
                visited += found[1] if found is not None else 0  # its lookup read them too
            frames.append(frame)
            self.rows_visited += visited
        before, after = frames
        joined = after.join(before, on="id", how="left", suffix="_before",
                            maintain_order="left")
        had = pl.col("id").is_in(before.get_column("id").implode())
        # column by column, only the values that differ are rendered as text: an added
        # capsule (most of a long range) has no fields, and a changed one a few
        changed = pl.concat([
            joined.filter(had & pl.col(f"{c}_before").ne_missing(pl.col(c))).select(
                "id", pl.lit(c).alias("field"),
                _text(pl.col(f"{c}_before"), dtype).alias("before"),
                _text(pl.col(c), dtype).alias("after"))
            for c, dtype in after.schema.items() if c != "id"], how="vertical")
        changed = changed.filter(pl.col("before").ne_missing(pl.col("after")))
        # erased content stays erased: text a capsule no longer holds is never shown
        gone = (pl.col("field") == "content") & pl.col("after").is_null()
        fields = changed.select("id", "field", pl.when(gone).then(None)
                                .otherwise(pl.col("before")).alias("before"), "after")
        per_id = changed.group_by("id").agg(pl.col("field").sort().alias("fields"))
        out = (joined.select("id", had.alias("had"))
               .join(frames[1].select("id", pl.col("project_id").alias("_project")),
                     on="id", how="left", maintain_order="left")
               .join(per_id, on="id", how="left")
               .filter(~pl.col("had") | pl.col("fields").is_not_null())
               .select("id",
                       pl.when(pl.col("had")).then(pl.lit("changed"))
                       .otherwise(pl.lit("added")).alias("change"),
                       pl.col("fields").fill_null(pl.lit([], dtype=pl.List(pl.String()))),
                       pl.col("_project").alias("project_id")))
        return _by_number(out).cast(CAPSULES_SCHEMA), _by_number(fields).cast(FIELDS_SCHEMA)

    def to_dict(self) -> dict[str, Any]:
        return {"since": self.since, "until": self.until, "summary": self.summary,
                "capsules": self.capsules.to_dicts(), "fields": self.fields.to_dicts(),
                "rows_visited": self.rows_visited}

    def to_json(self) -> str:
        """Compact JSON of `to_dict` (the same store and generations give the same bytes)."""
        return "".join(self.json_pieces())

    def json_pieces(self) -> Iterator[str]:
        """The text of `to_json` in pieces (a few thousand rows each): a diff across a long
        range lists millions of capsules, never held as one text or as dicts."""
        head = {"since": self.since, "until": self.until, "summary": self.summary}
        yield json.dumps(head, ensure_ascii=False, separators=(",", ":"))[:-1]
        for name, frame in (("capsules", self.capsules), ("fields", self.fields)):
            yield f',"{name}":'
            yield from records_json_pieces(frame)
        yield f',"rows_visited":{self.rows_visited}}}'

    def to_text(self, width: int = 80) -> str:
        """The summary and the capsules that changed, in lines of at most ``width``
        columns (stored text made safe for a terminal)."""
        from memframe._render.terminal import terminal_text

        lines = [f"store diff: generation {self.since} -> {self.until} "
                 f"({self.rows_visited:,} rows read)"]
        lines += [f"  {word}: {n:,}" for word, n in self.summary.items()] or ["  nothing"]
        if self.capsules.height:
            lines.append(f"capsules added or changed: {self.capsules.height:,}")
            for cid, change, fields, project in self.capsules.head(50).iter_rows():
                what = ", ".join(fields) if fields else "new"
                lines.append(f"  {cid} [{project}] {change}: {what}")
            if self.capsules.height > 50:
                lines.append(f"  ... {self.capsules.height - 50:,} more (StoreDiff.capsules)")
        return terminal_text("\n".join(lines), width) + "\n"

    def to_html(self) -> str:
        """A self-contained page (stored text escaped)."""
        from memframe._render.html import html_table, kv_table, page

        body = (f"<h1>Store diff: generation {self.since} to {self.until}</h1>"
                f'<p class="mf-sub">{self.rows_visited:,} rows read</p>'
                + kv_table(self.summary.items(), caption="What changed")
                + html_table(self.capsules.with_columns(pl.col("fields").list.join(", ")),
                             caption="Capsules added or changed", limit=500)
                + html_table(self.fields, caption="Fields before and after", limit=500))
        return page(f"memframe store diff {self.since}..{self.until}", body)

    def __repr__(self) -> str:
        words = ", ".join(f"{n} {k}" for k, n in self.summary.items()) or "nothing"
        return (f"StoreDiff(generation {self.since} -> {self.until}: {words}; "
                f"{self.capsules.height} capsules added or changed)")


#: the canonical tables `capsule_state` folds (what its reads cost)
_STATE_TABLES = ("capsules", "forgets", "recalls", "classifications", "tiers", "relations")


def _rewritten(since: StoreView, until: StoreView, numbers: list[int]) -> list[int]:
    """The capsule ``numbers`` (sorted) whose row at ``since`` sits in a partition
    ``until`` no longer names (an erasure or a compaction rewrote it): only their capsule
    rows can differ between the two (a partition file never changes)."""
    kept_paths = {p.path for p in until.partitions("capsules")}
    out, seen, at = [], 0, 0
    for part in since.partitions("capsules"):
        top = seen + part.rows
        while at < len(numbers) and numbers[at] <= top:
            if numbers[at] > seen and part.path not in kept_paths:
                out.append(numbers[at])
            at += 1
        seen = top
    return out


def _kept_state(view: StoreView, kept: tuple[pl.DataFrame, int], rewritten: list[int],
                wanted: pl.Series) -> tuple[pl.DataFrame, int]:
    """`capsule_state` rows of the ``wanted`` ids at ``view`` from the digest's kept state
    (their folded rows, looked up by key: `Memory.kept_state_of`), and the rows read. The
    capsule rows are read (by ``seq``, only the row groups that hold them) for the
    ``rewritten`` numbers alone; the others' capsule columns are the same at both ends
    (their partition is unchanged), so the state's own (``seq``, ``created_at``,
    ``project_id``) stand for them and the rest are left null on both sides."""
    folded, visited = kept
    schema = view.table("capsules").collect_schema()
    again = folded.filter(pl.col(KEY).is_in(pl.Series(rewritten, dtype=pl.Int64).implode()))
    rows, read = view.read_by_seq("capsules", again.get_column("seq").drop_nulls().to_list(),
                                  list(schema.names()))
    same = folded.filter(pl.col("seq").is_not_null() & ~pl.col(KEY).is_in(again[KEY].implode()))
    given = {"id": pl.format("cap-{}", pl.col(KEY)), "seq": pl.col("seq"),
             "created_at": pl.col("created_at"), "project_id": pl.col("project_id")}
    stand_in = same.select([given.get(c, pl.lit(None)).cast(t).alias(c)
                            for c, t in schema.items()])
    capsules = pl.concat([rows.filter(pl.col("id").is_in(wanted)), stand_in], how="vertical")
    return (capsule_state_of(capsules.lazy(), folded.lazy()).collect(), visited + read)


def _folded_state(view: StoreView, wanted: pl.Series, numbers: list[int]
                  ) -> tuple[pl.DataFrame, int]:
    """`capsule_state` rows of the ``wanted`` ids (``numbers``: their capsule numbers,
    sorted) at ``view`` without kept state, and the rows read: each table the fold reads
    is cut to the rows keyed by those ids before it is folded (the fold groups by that
    key, so the rows kept are all a wanted capsule's state needs), reading of ``capsules``
    only the partitions that hold those numbers (the n-th capsule row is ``cap-n``)."""
    parts, seen, at = [], 0, 0
    for part in view.partitions("capsules"):
        while at < len(numbers) and numbers[at] <= seen:
            at += 1
        if at < len(numbers) and numbers[at] <= seen + part.rows:
            parts.append(part)
        seen += part.rows
    visited = sum(p.rows for p in parts)
    tables = dict(view.tables())
    tables["capsules"] = view.scan_partitions("capsules", parts)
    for name in _STATE_TABLES:
        key = SOURCE_KEY.get(name, "capsule_id")
        tables[name] = tables[name].filter(pl.col(key).is_in(wanted))
        visited += view.row_count(name) if name != "capsules" else 0
    return fold_capsule_state(tables).collect(), visited


def _named(added: dict[str, pl.LazyFrame]) -> pl.Series:
    """The capsule ids the added rows name, in the order of their numbers (a series: a
    long range names tens of millions)."""
    columns = []
    for name in ("capsules", "forgets", "recalls", "classifications", "tiers", "relations",
                 "reviews", "pins"):
        schema = added[name].collect_schema()
        columns += [added[name].select(pl.col(c).alias("id")) for c in CAPSULE_REFS
                    if c in schema and schema[c] == pl.String]
    if not columns:
        return pl.Series("id", [], dtype=pl.String)
    found = (pl.concat(columns, how="vertical").filter(pl.col("id").str.starts_with("cap-"))
             .unique().sort(capsule_number_expr("id"), "id").collect(engine="streaming"))
    return found.get_column("id")


def _text(column: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    """``column``'s values as JSON text (instants in RFC 3339, the way ``to_json`` writes
    them), null where there is no value."""
    if isinstance(dtype, pl.Datetime):
        value = pl.format('"{}"', rfc3339(column))
    else:  # {"v":<json>} -> <json>
        value = pl.struct(column.alias("v")).struct.json_encode().str.slice(5).str.strip_suffix("}")
    return pl.when(column.is_null()).then(None).otherwise(value)


def _by_number(frame: pl.DataFrame) -> pl.DataFrame:
    from memframe.ids import capsule_number_expr

    return (frame.with_columns(capsule_number_expr("id").alias("_n"))
            .sort("_n", *(["field"] if "field" in frame.columns else []))
            .drop("_n"))


def _summary(added: dict[str, pl.LazyFrame]) -> dict[str, int]:
    """Counts per kind of change, in words (one streaming pass per table)."""
    out: dict[str, int] = {}

    def put(word: str, n: int | None) -> None:
        if n:
            out[word] = out.get(word, 0) + int(n)

    def count(table: str, where: pl.Expr | None = None) -> int:
        frame = added[table] if where is None else added[table].filter(where)
        return int(frame.select(pl.len()).collect(engine="streaming").item())

    put("ingested", count("capsules"))
    put("handoffs", count("capsules", pl.col("source") == "memory_session_finish"))
    for table, column, word in (("forgets", "mode", "forgotten ({})"),
                                ("reviews", "verdict", "reviewed ({})"),
                                ("relations", "kind", "new relations ({})")):
        kinds = added[table].group_by(column).len().collect(engine="streaming")
        for value, n in sorted(kinds.iter_rows()):
            put(word.format(value), n)
    put("superseded", count("relations", pl.col("kind") == "supersedes"))
    for table in ("tiers", "classifications", "recall_misses", "lane_overrides",
                  "recall_receipts", "recall_aliases"):
        put(_WORDS[table], count(table))
    put("pinned", count("pins", pl.col("pinned")))
    put("unpinned", count("pins", ~pl.col("pinned")))
    put("recalled", added["recalls"].select(pl.col("count").sum()).collect().item())
    put("sessions started", count("brackets", pl.col("event") == "start"))
    put("sessions finished", count("brackets", pl.col("event") == "finish"))
    return out
