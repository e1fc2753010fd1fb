"""Planning an import: what a full or an incremental import appends."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Mapping
from typing import Any

import polars as pl

from memframe import schema as S
from memframe._scalars import as_int
from memframe.errors import (
    ImportSourceError,
    SourceRewrittenError,
)
from memframe.ids import capsule_number_expr
from memframe.importers.nmemory.common import (
    _IN_CHUNK,
    _NO_MARK,
)
from memframe.importers.nmemory.convert import (
    _CAPSULE_TABLES,
    _KEYED_SIDECARS,
    _SEQ_ROWS,
    _bracket_rows,
    _capsule_rows,
    _check_capsule_refs,
    _check_returned_ids,
    _classification_rows,
    _cursor_rows,
    _fail,
    _forget_rows,
    _journal_rows,
    _Notes,
    _recall_rows,
    _relation_rows,
    _session_number,
    _session_projects,
    _sessions,
    _tier_rows,
    alias_rows,
    check_state_refs,
)
from memframe.importers.nmemory.source import (
    _Source,
)
from memframe.state import current_sidecar, latest_by_seq
from memframe.store import StoreView

# ---- planning ----------------------------------------------------------------------------

@dataclasses.dataclass
class _Plan:
    """What an import appends, handed to the commit (``sink``) as it is read: the commit
    writes whole partitions as they fill, so the import holds a batch, not the file."""

    base_generation: int
    sink: Callable[[str, pl.DataFrame, str], None]
    counts: dict[str, int] = dataclasses.field(default_factory=dict)
    erase: dict[str, str] = dataclasses.field(default_factory=dict)  # capsule id -> mode
    capsules: int = 0
    sessions: int = 0

    def add(self, table: str, frame: pl.DataFrame, source: str) -> None:
        """Append ``frame`` (rows of source table ``source``) to ``table`` now."""
        if frame.height:
            self.counts[table] = self.counts.get(table, 0) + frame.height
            self.sink(table, frame, source)

    @property
    def empty(self) -> bool:
        return not self.counts

    def added(self) -> dict[str, int]:
        return {t: self.counts[t] for t in S.CANONICAL_TABLES if self.counts.get(t)}


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
    for table in src.seq_tables:
        top = src.scalar(f'SELECT MAX(seq) FROM "{table}"')
        top = int(top) if top is not None else 0
        marks[table] = {"seq": top, "rows": src.count(table),
                        "tail": src.tail(table, top) if top else None,
                        "hash": src.fingerprint(table, top)}
    return marks


def _read_capsules(src: _Source, after: int, tombs: pl.DataFrame, notes: _Notes,
                   progress: _Progress, batch_rows: int, plan: _Plan) -> int:
    """Append the source's capsules past seq ``after``, a batch at a time; how many."""
    first = after + 1
    for raw in src.batches("capsules", "seq > ?", [after], "seq", batch_rows=batch_rows):
        if raw.height == 0:
            continue
        plan.add("capsules", _capsule_rows(raw, tombs, first, notes), "capsules")
        first += raw.height
        progress.update(raw.height)
    return first - after - 1


def _read_journal(src: _Source, after: int, progress: _Progress, batch_rows: int,
                  plan: _Plan) -> None:
    """Append the source's audit chain past seq ``after``, a batch at a time (last: the
    journal's rows take the commit's last seqs)."""
    for batch in src.batches("audit_events", "seq > ?", [after], "seq", batch_rows=batch_rows):
        plan.add("journal", _journal_rows(batch), "audit_events")
        progress.update(batch.height)


def _full_plan(src: _Source, plan: _Plan, notes: _Notes, progress: _Progress,
               batch_rows: int) -> None:
    """Append everything a first import reads from ``src`` to ``plan``."""
    tombs = src.read("tombstones")
    progress.update(tombs.height)
    plan.capsules = _read_capsules(src, 0, tombs, notes, progress, batch_rows, plan)
    _check_tombstone_targets(tombs, plan.capsules)
    plan.add("forgets", _forget_rows(tombs, notes), "tombstones")
    _one_to_one(src, plan, notes, progress)
    sessions = _sessions(src.read("sessions"), notes)
    progress.update(sessions.height)
    plan.add("brackets", _bracket_rows(sessions, _session_projects(src, None)), "sessions")
    plan.sessions = as_int(_session_number(sessions["session_id"]).max() or 0)
    _seq_rows(src, plan, notes, progress, None)
    _read_journal(src, 0, progress, batch_rows, plan)


def _seq_rows(src: _Source, plan: _Plan, notes: _Notes, progress: _Progress,
              old: Mapping[str, Any] | None) -> None:
    """The append-only tables beside the journal: all their rows (``old`` None), or those
    past the watermark ``old``."""
    for table, (target, convert) in _SEQ_ROWS.items():
        if table not in src.tables:
            continue
        rows = (src.read(table, order="seq") if old is None else
                src.read(table, "seq > ?", [old.get(table, _NO_MARK)["seq"]], order="seq"))
        progress.update(rows.height)
        if table in _CAPSULE_TABLES:
            _check_capsule_refs(table, rows, plan.capsules)
        plan.add(target, _converted(convert, rows, notes, plan.capsules), table)


def _converted(convert: Any, rows: pl.DataFrame, notes: _Notes, capsules: int) -> pl.DataFrame:
    out = convert(rows, notes)
    if "returned_ids" in out.columns:  # a receipt names capsules of the source only
        _check_returned_ids(out, capsules)
    return out


def _one_to_one(src: _Source, plan: _Plan, notes: _Notes, progress: _Progress) -> None:
    """The mutable side tables of a first import: relations, usage, labels, tiers, cursors."""
    rel = _read_relations(src, plan.capsules, notes)
    progress.update(rel.height)
    plan.add("relations", rel, "relations")
    usage = _read_usage(src, notes, plan.capsules)
    progress.update(usage.height)
    plan.add("recalls", usage, "usage")
    for table, convert, order in (
        ("classifications", _classification_rows, ""),
        ("tiers", _tier_rows, ""),
        ("source_cursors", _cursor_rows, "source_key"),
    ):
        rows = src.read(table, order=order)
        progress.update(rows.height)
        if table != "source_cursors":
            check_state_refs(table, rows, plan.capsules)
        plan.add(table, convert(rows, notes), table)
    for source, (table, keyed_rows) in _KEYED_SIDECARS.items():
        if source in src.tables:
            rows = keyed_rows(src.read(source, order="capsule_id"), notes, plan.capsules)
            progress.update(rows.height)
            plan.add(table, rows.sort("at", capsule_number_expr("capsule_id")), source)
    if "synonyms" in src.tables:
        rows = alias_rows(src.read("synonyms"), notes)
        progress.update(rows.height)
        plan.add("recall_aliases", rows, "synonyms")


def _read_relations(src: _Source, capsules: int, notes: _Notes) -> pl.DataFrame:
    """Every relation row of the source, checked against what the source issued."""
    rows = src.read("relations", order="at, kind, from_id, to_id")
    return _relation_rows(rows, notes, S.ENGINE_RELATION_KINDS[src.version], capsules,
                          src.outcome_ids())


def _read_usage(src: _Source, notes: _Notes, capsules: int) -> pl.DataFrame:
    """The usage rows as recall rows (recall counts are whole numbers in the source), of
    capsules the source issued."""
    src.refuse_non_integers("usage", "recall_count", "capsule_id",
                            "the engine counts recalls in whole numbers")
    usage = src.read("usage")
    check_state_refs("usage", usage, capsules)
    return _recall_rows(usage, notes)


def _check_tombstone_targets(tombs: pl.DataFrame, capsules: int) -> None:
    num = tombs.select(capsule_number_expr("capsule_id")).to_series()
    _fail("tombstones", "capsule_id", tombs,
          num.is_null() | (num > capsules), f"names no capsule of the source (capsules run cap-1..cap-{capsules})")


def _refuse(what: str) -> SourceRewrittenError:
    return SourceRewrittenError(
        f"the source changed in a way that is not an append since the last import: {what}. "
        f"An incremental import only adds; import the file into a new store instead"
    )


def _incremental_plan(src: _Source, view: StoreView, mark: Mapping[str, Any], plan: _Plan,
                      notes: _Notes, progress: _Progress, batch_rows: int) -> None:
    """Append to ``plan`` what ``src`` holds past the import that left ``view`` (its
    watermark ``mark``); refuse a source rewritten otherwise than by appends."""
    old = mark["tables"]
    # append-only tables: the rows up to the watermark must be exactly what was imported
    for table in src.seq_tables:
        seen = old.get(table, _NO_MARK)
        seq, rows, tail = seen["seq"], seen["rows"], seen["tail"]
        if src.count(table, "seq <= ?", [seq]) != rows:
            raise _refuse(f"{table} no longer holds the {rows} row(s) up to seq {seq} it had")
        if seq and src.tail(table, seq) != tail:
            raise _refuse(f"{table} row seq {seq} (the last one imported) was rewritten")
        if "hash" in seen and src.fingerprint(table, seq) != seen["hash"]:
            raise _refuse(f"{table} holds a row up to seq {seq} (imported already) that was "
                          f"edited in place")
    n_old = int(old["capsules"]["seq"])
    tombs = src.read("tombstones")
    progress.update(tombs.height)
    plan.capsules = n_old + _read_capsules(src, n_old, tombs, notes, progress, batch_rows,
                                           plan)
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
    _check_imported_capsules(src, view, n_old, tombs, notes, batch_rows)
    fresh = forgets.join(stored.select("capsule_id"), on="capsule_id", how="anti")
    plan.add("forgets", fresh, "tombstones")
    older = fresh.filter(capsule_number_expr("capsule_id") <= n_old)
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
    _seq_rows(src, plan, notes, progress, old)
    _read_journal(src, old["audit_events"]["seq"], progress, batch_rows, plan)


def _check_imported_capsules(src: _Source, view: StoreView, n_old: int, tombs: pl.DataFrame,
                             notes: _Notes, batch_rows: int) -> None:
    """Refuse a source whose already-imported capsules were edited in place: each one the
    source still holds (not tombstoned since) must decode to the row the store holds
    (erased rows aside). This reads every imported capsule of the source again, once per
    incremental import: the price of the promise that any rewrite is refused."""
    if not n_old:
        return
    first = 1
    columns = [c for c in S.table_schema("capsules").names() if c != "seq"]
    for raw in src.batches("capsules", "seq <= ?", [n_old], "seq", batch_rows=batch_rows):
        if raw.height == 0:
            continue
        try:
            mine = _capsule_rows(raw, tombs, first, notes)
        except SourceRewrittenError:
            raise
        except ImportSourceError as exc:
            raise _refuse(f"a capsule imported already no longer reads as it did ({exc})"
                          ) from None
        first += raw.height
        stored = (view.table("capsules")
                  .filter(pl.col("id").is_in(mine["id"].to_list()))
                  .select(columns).collect())
        both = mine.filter(pl.col("content").is_not_null()).join(
            stored.filter(pl.col("content").is_not_null()), on="id", suffix="_store")
        differs = pl.any_horizontal([pl.col(c).ne_missing(pl.col(f"{c}_store"))
                                     for c in columns if c not in ("id", "author")])
        edited = both.filter(differs)
        if edited.height:
            raise _refuse(f"capsule {edited['id'][0]} (imported already) was edited in place")


def _incremental_side_tables(src: _Source, view: StoreView, plan: _Plan, notes: _Notes,
                             progress: _Progress) -> None:
    """Diff nMEMORY's mutable side tables against the store's folds; append the changes."""
    now = view.now()
    # relations: (kind, from, to) is the key; imported edges must be unchanged
    rel = _read_relations(src, plan.capsules, notes)
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
    usage = _read_usage(src, notes, plan.capsules)
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
             .sort("at", capsule_number_expr("capsule_id")))
    plan.add("recalls", delta, "usage")
    # classifications / tiers / cursors: latest-by-seq labels; changes are new rows
    for table, convert, keys, values, removable in (
        ("classifications", _classification_rows, ["capsule_id"], ["kind", "scope", "at"], None),
        ("tiers", _tier_rows, ["capsule_id"], ["tier", "at"], {"tier": "active"}),
        ("source_cursors", _cursor_rows, ["source_key"], ["cursor", "at"], None),
    ):
        raw = src.read(table)
        if table != "source_cursors":
            check_state_refs(table, raw, plan.capsules)
        new = convert(raw, notes)
        progress.update(new.height)
        cur = latest_by_seq(view.table(table), *keys).select(*keys, *values).collect()
        gone = cur.join(new, on=keys, how="anti")
        if gone.height:
            if removable is None:
                raise _refuse(f"the {table} row of {gone[keys[0]][0]} disappeared")
            # a tier row removed means the capsule is active again
            gone = gone.filter(pl.col("tier") != "active").select(
                pl.lit(now).cast(S.TIMESTAMP).alias("at"), *keys,
                *[pl.lit(v).alias(k) for k, v in removable.items()])
        diff = new.join(cur, on=keys, how="left", suffix="_old").filter(
            pl.any_horizontal([pl.col(v).ne_missing(pl.col(f"{v}_old")) for v in values]))
        rows = diff.select(new.columns)
        if gone.height:
            rows = pl.concat([rows, gone.select(new.columns)])
        plan.add(table, rows, table)
    # event times and epistemics (v21): one row per capsule in the source; a changed or new
    # one becomes a new row, so the fold (latest by seq; per field for epistemics) equals it
    for source, (table, keyed_rows) in _KEYED_SIDECARS.items():
        if source not in src.tables:
            continue
        new = keyed_rows(src.read(source), notes, plan.capsules)
        progress.update(new.height)
        cur = current_sidecar(table, view.table(table)).collect()
        values = [c for c in new.columns if c != "capsule_id"]
        gone = cur.join(new, on="capsule_id", how="anti")
        if gone.height:
            raise _refuse(f"the {source} row of {gone['capsule_id'][0]} disappeared")
        diff = new.join(cur, on="capsule_id", how="left", suffix="_old").filter(
            pl.any_horizontal([pl.col(v).ne_missing(pl.col(f"{v}_old")) for v in values]))
        plan.add(table, diff.select(new.columns).sort("at", capsule_number_expr("capsule_id")),
                 source)
    # taught aliases: a pair is taught once and never changes; new pairs are appended
    if "synonyms" in src.tables:
        new = alias_rows(src.read("synonyms"), notes)
        progress.update(new.height)
        key = ["term", "alias"]
        stored = view.table("recall_aliases").select("at", *key).collect()
        lost = stored.join(new, on=key, how="anti")
        if lost.height:
            r = lost.row(0, named=True)
            raise _refuse(f"the taught alias {r['term']!r} -> {r['alias']!r} disappeared "
                          f"(the engine drops the synonyms table on request)")
        moved = stored.join(new, on=key, suffix="_src").filter(pl.col("at") != pl.col("at_src"))
        if moved.height:
            r = moved.row(0, named=True)
            raise _refuse(f"the taught alias {r['term']!r} -> {r['alias']!r} changed its "
                          f"instant (taught again after it was dropped)")
        plan.add("recall_aliases", new.join(stored.select(key), on=key, how="anti",
                                            maintain_order="left"), "synonyms")
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
    added = pl.concat([_bracket_rows(new_sessions, projects),
                       _bracket_rows(finishing, projects, "finish")])
    plan.add("brackets", added.sort(
        "at", _session_number(added["session_id"]),
        pl.col("event").eq("finish")), "sessions")
    plan.sessions = as_int(_session_number(sessions["session_id"]).max() or 0)


