"""`Store`: a handle on a store directory; views pinned to one generation."""

from __future__ import annotations

import contextlib
import datetime
import html
import os
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from memframe import schema as S
from memframe.errors import (
    ConcurrentCommitError,
    InvalidInputError,
    MemframeError,
    ReadOnlyStoreError,
)
from memframe.store import capture, tables
from memframe.store.index import Indexes
from memframe.store.log import Log, Part, Snapshot
from memframe.text import parse_instant

if TYPE_CHECKING:
    from memframe.projections import Memory

Clock = Callable[[], datetime.datetime]

_MAX_ATTEMPTS = 200


def _system_clock() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _commit_stamp(instant: datetime.datetime) -> str:
    """Fixed-width UTC text, so commit stamps compare as strings (for as_of)."""
    return instant.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class StoreView:
    """A read-only view of a store at one generation.

    Every read of a view sees exactly that generation, whatever is committed later.
    `Store.at(g)`, `Store.as_of(t)` and `Store.pinned()` return views; the digest and
    every door accept them as well as a `Store`.
    """

    def __init__(self, log: Log, snapshot: Snapshot, clock: Clock):
        self._log = log
        self._snap = snapshot
        self._clock = clock

    # -- identity -------------------------------------------------------------------------
    @property
    def path(self) -> Path:
        return self._log.root

    @property
    def generation(self) -> int:
        return self._snap.generation

    @property
    def committed_at(self) -> str | None:
        """When the pinned generation was committed (UTC text), None for an empty store."""
        return self._snap.timestamp

    @property
    def snapshot(self) -> Snapshot:
        return self._snap

    def pinned(self) -> StoreView:
        return self

    def now(self) -> datetime.datetime:
        """The injected clock's "now" (used by the digest's time-dependent fields)."""
        return _checked_now(self._clock)

    @property
    def watermarks(self) -> Mapping[str, Any]:
        return self._snap.watermarks

    # -- tables ---------------------------------------------------------------------------
    def table(self, name: str) -> pl.LazyFrame:
        """A canonical table at this generation.

        Examples:
            >>> import memframe as mf, tempfile, os
            >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
            >>> store.ingest({"content": "hello", "source": "note", "anchor": "a"})
            ['cap-1']
            >>> store.table("capsules").select("id", "content").collect().rows()
            [('cap-1', 'hello')]
        """
        return tables.scan(self._log.root, self._snap.parts(name), S.table_schema(name))

    def tables(self) -> dict[str, pl.LazyFrame]:
        """All 14 canonical tables at this generation (name -> LazyFrame)."""
        return {name: self.table(name) for name in S.CANONICAL_TABLES}

    def derived(self, name: str, schema: pl.Schema) -> pl.LazyFrame:
        """A derived table (e.g. ``projections/session``) at this generation."""
        return tables.scan(self._log.root, self._snap.parts(name), schema)

    def read_matching(self, name: str, schema: pl.Schema, column: str, values: Sequence[str],
                      columns: Sequence[str] | None = None) -> tuple[pl.DataFrame, int]:
        """Rows of ``name`` whose ``column`` is in ``values`` and the Parquet rows read."""
        return tables.read_matching(self._log.root, self._snap.parts(name), schema, column,
                                    values, columns)

    def read_by_seq(self, name: str, seqs: Sequence[int], columns: Sequence[str]
                    ) -> tuple[pl.DataFrame, int]:
        """Rows of ``name`` whose ``seq`` is in ``seqs`` (reading only the row groups that can
        hold them) and the Parquet rows read."""
        return tables.read_by_seq(self._log.root, self._snap.parts(name), S.table_schema(name),
                                  seqs, columns)

    def row_count(self, name: str) -> int:
        """Rows in a table's partitions at this generation (from the log, nothing read)."""
        return sum(p.rows for p in self._snap.parts(name))

    def files(self, name: str) -> list[Path]:
        """The partition files of a table at this generation."""
        return [self._log.root / p.path for p in self._snap.parts(name)]

    def capsule_state(self) -> pl.LazyFrame:
        """One row per capsule: status, usage, kind, tier and the capsule's columns."""
        from memframe.state import capsule_state  # state sits above store: import at call

        return capsule_state(self.tables())

    # -- time travel ----------------------------------------------------------------------
    def at(self, generation: int) -> StoreView:
        """A frozen view of the store as it was at ``generation``."""
        if not isinstance(generation, int) or isinstance(generation, bool):
            raise InvalidInputError(f"generations are integers; got {generation!r}")
        return StoreView(self._log, self._log.snapshot(generation), self._clock)

    def as_of(self, instant: datetime.datetime | str) -> StoreView:
        """A frozen view of the newest generation committed at or before ``instant``."""
        instant = parse_instant(instant, "as_of")
        return self.at(self._log.generation_for_instant(_commit_stamp(instant)))

    # -- display --------------------------------------------------------------------------
    def _summary_rows(self) -> list[tuple[str, int, int]]:
        return [(name, self.row_count(name), len(self._snap.parts(name)))
                for name in S.CANONICAL_TABLES]

    def __repr__(self) -> str:
        kind = type(self).__name__
        lines = [f"<memframe {kind} {str(self.path)!r} generation={self.generation}>"]
        for name, rows, parts in self._summary_rows():
            if rows:
                lines.append(f"  {name:<16} {rows:>10,} rows in {parts} partition(s)")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        esc = html.escape
        body = "".join(
            f"<tr><td>{esc(name)}</td><td style='text-align:right'>{rows:,}</td>"
            f"<td style='text-align:right'>{parts}</td></tr>"
            for name, rows, parts in self._summary_rows()
        )
        return (
            f"<div><b>memframe {esc(type(self).__name__)}</b> <code>{esc(str(self.path))}</code>"
            f" generation <b>{self.generation}</b>"
            f"<table><thead><tr><th>table</th><th>rows</th><th>partitions</th></tr></thead>"
            f"<tbody>{body}</tbody></table></div>"
        )

    # -- projections ----------------------------------------------------------------------
    @property
    def memory(self) -> Memory:
        """The projection doors (spec 000): sessions, session_digest, episodes, cycle, ..."""
        from memframe.projections import Memory  # projections sit above store

        return Memory(self)

    # -- writes are refused on views -----------------------------------------------------
    def _refuse(self, *_: Any, **__: Any) -> Any:
        raise ReadOnlyStoreError(
            f"this is a frozen view of generation {self.generation}; write through "
            f"mf.Store.open({str(self.path)!r})"
        )

    def _commit(self, fn: Callable[[capture.Commit], Any], op: str) -> Any:
        return self._refuse()

    ingest = relate = forget = record_recall = record_miss = record_lane_override = _refuse
    classify = session_start = session_finish = record_git_scan = transaction = _refuse
    append = compact = vacuum = _refuse


def _checked_now(clock: Clock) -> datetime.datetime:
    now = clock()
    if not isinstance(now, datetime.datetime):
        raise MemframeError(f"the store's clock returned {now!r}; it must return a datetime")
    if now.tzinfo is None:
        raise MemframeError("the store's clock returned a naive datetime; return an aware one "
                            "(e.g. datetime.now(timezone.utc))")
    return now.astimezone(datetime.UTC)


class Store(StoreView):
    """A memframe store: canonical Parquet tables under a generation log.

    A handle reads the newest generation at the start of each call and sees its own
    commits; each call pins that generation for its whole duration.

    Examples:
        >>> import memframe as mf, tempfile, os, datetime as dt
        >>> clock = lambda: dt.datetime(2026, 7, 23, 12, tzinfo=dt.timezone.utc)
        >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"), clock=clock)
        >>> store.ingest([{"content": "alpha", "source": "note", "anchor": "a"},
        ...               {"content": "beta", "source": "note", "anchor": "b"}])
        ['cap-1', 'cap-2']
        >>> store.generation
        1
    """

    def __init__(self, log: Log, clock: Clock | None = None, actor: str = "memframe"):
        self._clock = clock or _system_clock
        self._actor = actor
        self._indexes = Indexes(log.root)
        self._lock = threading.RLock()
        self._tx: _Transaction | None = None
        super().__init__(log, log.snapshot(), self._clock)

    @classmethod
    def create(cls, path: str | os.PathLike[str], *, clock: Clock | None = None,
               actor: str = "memframe") -> Store:
        """Create a new, empty store at ``path`` (which must be absent or empty)."""
        return cls(Log.create(Path(path)), clock, actor)

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, clock: Clock | None = None,
             actor: str = "memframe") -> Store:
        """Open an existing store; a teaching error if ``path`` is not one."""
        return cls(Log.open(Path(path)), clock, actor)

    # -- pinning --------------------------------------------------------------------------
    def _refresh(self) -> Snapshot:
        with self._lock:
            latest = self._log.latest_generation(known=self._snap.generation)
            if latest != self._snap.generation:
                self._snap = self._log.snapshot(latest, base=self._snap)
            return self._snap

    @property
    def snapshot(self) -> Snapshot:
        return self._refresh()

    @property
    def generation(self) -> int:
        return self._refresh().generation

    @property
    def committed_at(self) -> str | None:
        return self._refresh().timestamp

    @property
    def watermarks(self) -> Mapping[str, Any]:
        return self._refresh().watermarks

    def pinned(self) -> StoreView:
        """A frozen view of the newest generation (what one call should read)."""
        return StoreView(self._log, self._refresh(), self._clock)

    def table(self, name: str) -> pl.LazyFrame:
        return self.pinned().table(name)

    def tables(self) -> dict[str, pl.LazyFrame]:
        return self.pinned().tables()

    def derived(self, name: str, schema: pl.Schema) -> pl.LazyFrame:
        return self.pinned().derived(name, schema)

    def read_matching(self, *args: Any, **kwargs: Any) -> tuple[pl.DataFrame, int]:
        return self.pinned().read_matching(*args, **kwargs)

    def read_by_seq(self, *args: Any, **kwargs: Any) -> tuple[pl.DataFrame, int]:
        return self.pinned().read_by_seq(*args, **kwargs)

    def row_count(self, name: str) -> int:
        return self.pinned().row_count(name)

    def files(self, name: str) -> list[Path]:
        return self.pinned().files(name)

    def capsule_state(self) -> pl.LazyFrame:
        return self.pinned().capsule_state()

    def _summary_rows(self) -> list[tuple[str, int, int]]:
        return self.pinned()._summary_rows()

    # -- committing -----------------------------------------------------------------------
    def _new_commit(self, snap: Snapshot) -> capture.Commit:
        self._indexes.refresh(snap)
        return capture.Commit(
            snap,
            self._indexes,
            now=_checked_now(self._clock),
            actor=self._actor,
            read_part=lambda part: tables.read(self._log.root, [part],
                                               S.table_schema("capsules")),
        )

    def _commit(self, fn: Callable[[capture.Commit], Any], op: str) -> Any:
        """Run ``fn`` against the newest generation and land what it staged as the next one.

        A writer that loses the race for the next generation re-reads and runs ``fn``
        again, so seqs and ids are reassigned against what won.
        """
        if self._tx is not None:
            return self._tx.run(fn)
        with self._lock:
            for attempt in range(_MAX_ATTEMPTS):
                snap = self._refresh()
                commit = self._new_commit(snap)
                result = fn(commit)
                if commit.empty:
                    return result
                if self._land(commit, op):
                    return result
                time.sleep(random.uniform(0, 0.002 * min(attempt + 1, 20)))
            raise ConcurrentCommitError(
                f"gave up after {_MAX_ATTEMPTS} attempts: other writers kept committing first; "
                f"retry later or serialise the writers"
            )

    def _land(self, commit: capture.Commit, op: str) -> bool:
        snap = commit.snapshot
        generation = snap.generation + 1
        commit.journal_frame()
        written: list[Path] = []
        adds: list[dict[str, Any]] = []
        removes: list[str] = []
        try:
            n = 0
            for table, frames in commit.frames.items():
                whole = pl.concat(frames, how="vertical") if len(frames) > 1 else frames[0]
                # bounded partitions: an erasure rewrites one of them, not a whole bulk load
                for offset in range(0, whole.height, tables.PART_ROWS):
                    rel = tables.part_path(table, generation, n)
                    n += 1
                    part = tables.write_part(self._log.root, rel,
                                             whole.slice(offset, tables.PART_ROWS))
                    written.append(self._log.root / rel)
                    adds.append({"table": table, **part.to_json()})
            for old, frame in commit.rewrites.values():
                rel = tables.part_path("capsules", generation, n)
                n += 1
                part = tables.write_part(self._log.root, rel, frame)
                written.append(self._log.root / rel)
                adds.append({"table": "capsules", **part.to_json()})
                removes.append(old.path)
            for table, (frames, replace, rg) in commit.derived.items():
                if replace:
                    removes.extend(p.path for p in snap.parts(table))
                nonempty = [f for f in frames if f.height]
                if not nonempty:
                    continue
                frame = pl.concat(nonempty, how="vertical_relaxed")
                rel = tables.part_path(table, generation, n)
                n += 1
                kwargs = {"row_group_rows": rg} if rg else {}
                part = tables.write_part(self._log.root, rel, frame, **kwargs)
                written.append(self._log.root / rel)
                adds.append({"table": table, **part.to_json()})
            stamp = _commit_stamp(commit.now)
            if snap.timestamp is not None and stamp < snap.timestamp:
                stamp = snap.timestamp  # commit stamps never go backwards (as_of bisects them)
            first_seq = int(snap.counter("seq")) + 1
            entry = {
                "generation": generation,
                "parent": snap.generation,
                "operation": op,
                "verbs": commit.operations,
                "timestamp": stamp,
                "seq": [first_seq, commit.seq] if commit.seq >= first_seq else None,
                "add": adds,
                "remove": removes,
                "counters": commit.counters(),
                "watermarks": commit.watermarks,
            }
            won = self._log.try_commit(entry)
        except BaseException:
            for path in written:
                path.unlink(missing_ok=True)
            raise
        if not won:
            for path in written:
                path.unlink(missing_ok=True)
            return False
        self._snap = snap.apply(entry)
        if generation % 100 == 0:
            with contextlib.suppress(OSError):
                self._log.write_checkpoint(self._snap)
        return True

    # -- verbs ----------------------------------------------------------------------------
    def ingest(self, rows: Any) -> list[str]:
        """Write capsules; return their ids in input order.

        ``rows`` is a dict, a list of dicts or a DataFrame with ``content``, ``source`` and
        ``anchor`` (mandatory) and optionally project_id (default "default"), kind,
        confidence (0..1, default 0.6), created_at (default: the clock), valid_from,
        valid_to, authority_class, instruction_taint, conversation_id, author.
        Content already stored (same sha256) returns the existing id and writes nothing.
        """
        return self._commit(lambda c: capture.ingest(c, rows), "ingest")

    def relate(self, from_id: str, to_id: str, kind: str) -> None:
        """Record a typed edge; re-relating the same (kind, from, to) is a no-op."""
        self._commit(lambda c: capture.relate(c, from_id, to_id, kind), "relate")

    def forget(self, capsule_id: str, mode: str = "tombstone", reason: str | None = None) -> None:
        """Tombstone a capsule; ``redact``/``purge`` also erase its content bytes."""
        self._commit(lambda c: capture.forget(c, capsule_id, mode, reason), "forget")

    def record_recall(self, capsule_ids: Sequence[str] | str) -> None:
        """Record that these capsules were returned by a recall (usage)."""
        self._commit(lambda c: capture.record_recall(c, capsule_ids), "record_recall")

    def record_miss(self, terms: Sequence[str] | str, outcome: str) -> list[str]:
        """Record missed recall terms (folded per reference 4.7); returns the folded terms."""
        return self._commit(lambda c: capture.record_miss(c, terms, outcome), "record_miss")

    def record_lane_override(self, forced: str, auto_pick: str) -> None:
        """Record an explicit recall lane that disagreed with auto routing."""
        self._commit(lambda c: capture.record_lane_override(c, forced, auto_pick),
                     "record_lane_override")

    def classify(self, capsule_id: str, kind: str | None = None, tier: str | None = None) -> None:
        """Label a capsule's kind and/or move its tier."""
        self._commit(lambda c: capture.classify(c, capsule_id, kind, tier), "classify")

    def session_start(self, project: str = capture.DEFAULT_PROJECT,
                      session_id: str | None = None) -> str:
        """Open a session bracket; returns ``sess-<n>``."""
        return self._commit(lambda c: capture.session_start(c, project, session_id),
                            "session_start")

    def session_finish(self, sid: str, handoff: str | None = None) -> str | None:
        """Close a session; a handoff becomes a capsule (source ``memory_session_finish``)."""
        return self._commit(lambda c: capture.session_finish(c, sid, handoff), "session_finish")

    def record_git_scan(self, source_key: str, cursor: str,
                        corroborations: Sequence[Mapping[str, Any]] = ()) -> None:
        """Advance a git source's cursor and record the scan's corroborations."""
        self._commit(lambda c: capture.record_git_scan(c, source_key, cursor, corroborations),
                     "record_git_scan")

    def append(self, table: str, rows: Any) -> int:
        """Append many event rows of one table in one commit (the verbs, vectorised).

        ``table`` is one of relations, forgets, recalls, classifications, tiers,
        recall_misses, lane_overrides, corroborations, source_cursors, summaries. The rows
        follow the verbs' rules: capsule references must exist, vocabularies are closed,
        stored edges are skipped, audited tables get their journal rows. Returns the
        number of rows written.

        Examples:
            >>> import memframe as mf, tempfile, os
            >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
            >>> a, b, c = store.ingest([{"content": t, "source": "s", "anchor": t} for t in "abc"])
            >>> store.append("relations", {"kind": ["blocks", "blocks"], "from_id": [a, b],
            ...                            "to_id": [b, c]})
            2
        """
        if isinstance(rows, Mapping) and rows and all(isinstance(v, list) for v in rows.values()):
            rows = pl.DataFrame(rows)
        return self._commit(lambda c: capture.append_events(c, table, rows), f"append:{table}")

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Store]:
        """Group several verbs into one commit.

        Inside the block, verbs return their results at once; the commit lands when the
        block exits (nothing lands if it raises).

        Examples:
            >>> import memframe as mf, tempfile, os
            >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
            >>> with store.transaction():
            ...     a, b = store.ingest([{"content": "x", "source": "s", "anchor": "1"},
            ...                          {"content": "y", "source": "s", "anchor": "2"}])
            ...     store.relate(a, b, "blocks")
            >>> store.generation
            1
        """
        if self._tx is not None:
            raise InvalidInputError("transactions do not nest; run the verbs in the open one")
        with self._lock:
            tx = _Transaction(self)
            self._tx = tx
            try:
                yield self
            except BaseException:
                self._tx = None
                raise
            self._tx = None
            tx.land()

    # -- maintenance ----------------------------------------------------------------------
    def vacuum(self, *, grace_seconds: float = 60.0) -> dict[str, int]:
        """Remove files the newest generation does not name: crash orphans, replaced parts.

        A partition named for a generation that is already committed but not referenced
        now is garbage (replaced by compaction/erasure, or a losing writer's leftover). A
        partition for a future generation may belong to a writer still committing, so it is
        removed only once older than ``grace_seconds``. After a vacuum, time travel reaches
        back only to generations whose files remain.

        Returns:
            Counts of removed ``partitions`` and ``temporary`` files.
        """
        with self._lock:
            snap = self._refresh()
            keep = {p.path for parts in snap.tables.values() for p in parts}
            cutoff = time.time() - grace_seconds
            removed = {"partitions": 0, "temporary": 0}
            for dirpath, _dirs, files in os.walk(self._log.root):
                for name in files:
                    full = Path(dirpath, name)
                    rel = full.relative_to(self._log.root).as_posix()
                    if name.startswith(".tmp-"):
                        if full.stat().st_mtime < cutoff:
                            full.unlink(missing_ok=True)
                            removed["temporary"] += 1
                    elif name.endswith(".parquet") and rel not in keep:
                        if _part_generation(name) > snap.generation and full.stat().st_mtime >= cutoff:
                            continue  # possibly a writer still committing
                        full.unlink(missing_ok=True)
                        removed["partitions"] += 1
            return removed

    def compact(self, table: str | None = None, *, min_rows: int = 65_536) -> dict[str, int]:
        """Merge runs of small partitions of a table into one, changing no row.

        Only consecutive partitions (in seq order) are merged, so a table's partitions
        keep disjoint seq ranges. Returns merged-partition counts per table.
        """
        names = [table] if table is not None else list(S.CANONICAL_TABLES)
        for name in names:
            if name not in S.CANONICAL_TABLES:
                raise InvalidInputError(
                    f"unknown table {name!r}; compact one of: {', '.join(S.CANONICAL_TABLES)}"
                )
        with self._lock:
            for _attempt in range(_MAX_ATTEMPTS):
                snap = self._refresh()
                merged: dict[str, int] = {}
                runs: list[tuple[str, list[Part]]] = []
                for name in names:
                    run: list[Part] = []
                    for part in [*snap.parts(name), None]:
                        if part is not None and part.rows < min_rows:
                            run.append(part)
                            continue
                        if len(run) > 1:
                            runs.append((name, run))
                            merged[name] = merged.get(name, 0) + len(run)
                        run = []
                if not runs:
                    return {}
                commit = self._new_commit(snap)
                generation = snap.generation + 1
                adds, removes, written = [], [], []
                try:
                    for i, (name, run) in enumerate(runs):
                        frame = tables.read(self._log.root, run, S.table_schema(name))
                        rel = tables.part_path(name, generation, i)
                        part = tables.write_part(self._log.root, rel, frame)
                        written.append(self._log.root / rel)
                        adds.append({"table": name, **part.to_json()})
                        removes.extend(p.path for p in run)
                    entry = {
                        "generation": generation, "parent": snap.generation,
                        "operation": "compact", "verbs": ["compact"],
                        "timestamp": max(_commit_stamp(commit.now), snap.timestamp or ""),
                        "seq": None, "add": adds, "remove": removes,
                        "counters": dict(snap.counters), "watermarks": dict(snap.watermarks),
                    }
                    won = self._log.try_commit(entry)
                except BaseException:
                    for path in written:
                        path.unlink(missing_ok=True)
                    raise
                if won:
                    self._snap = snap.apply(entry)
                    return merged
                for path in written:
                    path.unlink(missing_ok=True)
            raise ConcurrentCommitError("compact kept losing the race to other writers; retry")


def _part_generation(name: str) -> int:
    """The generation a partition file was written for (``part-<generation>-...``)."""
    try:
        return int(name.split("-")[1])
    except (IndexError, ValueError):
        return 0


class _Transaction:
    """Verbs staged on one commit; replayed against a newer generation if a writer wins."""

    def __init__(self, store: Store):
        self.store = store
        self.calls: list[Callable[[capture.Commit], Any]] = []
        self.results: list[Any] = []
        self.commit = store._new_commit(store._refresh())

    def run(self, fn: Callable[[capture.Commit], Any]) -> Any:
        result = fn(self.commit)
        self.calls.append(fn)
        self.results.append(result)
        return result

    def land(self) -> None:
        store = self.store
        commit = self.commit
        for attempt in range(_MAX_ATTEMPTS):
            if commit.empty or store._land(commit, "transaction"):
                return
            commit = store._new_commit(store._refresh())
            replayed = [fn(commit) for fn in self.calls]
            if replayed != self.results:
                raise ConcurrentCommitError(
                    "another writer committed during the transaction and its verbs now give "
                    "different ids; nothing was written: run the transaction again"
                )
            time.sleep(random.uniform(0, 0.002 * min(attempt + 1, 20)))
        raise ConcurrentCommitError("the transaction kept losing the race to other writers; retry")

