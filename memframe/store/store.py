"""`Store`: a handle on a store directory; views pinned to one generation."""

from __future__ import annotations

import bisect
import concurrent.futures
import contextlib
import dataclasses
import datetime
import io
import os
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from memframe import schema as S
from memframe.errors import (
    ConcurrentCommitError,
    CorruptStoreError,
    GenerationNotFoundError,
    InvalidInputError,
    MemframeError,
    ReadOnlyStoreError,
)
from memframe.state import capsule_state as fold_capsule_state  # base layer, below the store
from memframe.store import capture, derived, fingerprint, objects, tables
from memframe.store import log as log_module
from memframe.store.delta import DeltaLogs
from memframe.store.index import Indexes
from memframe.store.log import Log, Part, Snapshot, fsync_dir
from memframe.store.mirror import MirrorLog, open_mirror
from memframe.store.spill import SpilledRows
from memframe.text import check_instant, journal_lines, parse_instant

Partition = Part  # the public name of one partition file's log entry

if TYPE_CHECKING:
    from memframe.jobs import Memory
    from memframe.store.diff import StoreDiff

Clock = Callable[[], datetime.datetime]

_MAX_ATTEMPTS = 200
#: a commit that rewrites files (or derived state) and lost this many races takes the
#: fairness ticket (`Log.take_ticket`); a commit that only appends, after _APPEND_TICKET
#: losses (its retry is cheap, and tickets for every small commit would form a convoy)
_TICKET_AFTER = 1
_APPEND_TICKET = 8
#: times an erasure that lost to commits that only appended renumbers its own rows and
#: links on top of them before it stages again (with the fairness ticket)
_RENUMBER_HOPS = 4
_PARALLEL_WRITE_ROWS = 50_000  # rows staged before a commit writes its files on two threads
_MAX_READ_ATTEMPTS = 20
#: vacuum's default retention: time travel keeps working for the last seven days
DEFAULT_RETENTION_HOURS = 168.0
# What a read raises when a file its pinned generation names was removed under it (a
# compaction, an erasure or a rebuild replaced it, then a vacuum ran): a Store handle runs
# the call again on the newer generation (`Store.read`, `Store.commit`); when the pinned
# generation is still the newest, the file is really missing and the error stands.
_VANISHED = (GenerationNotFoundError, CorruptStoreError, FileNotFoundError)
# what a read of a damaged file raises from below memframe (a torn Parquet file, an OS
# error): explained by `Store.explain_fault` as the file and the fix
_READ_FAULTS = (pl.exceptions.ComputeError, OSError)


def _system_clock() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def _commit_stamp(instant: datetime.datetime) -> str:
    """Fixed-width UTC text, so commit stamps compare as strings (for as_of)."""
    return instant.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


#: bytes of partition files parsed together by `StoreView.read_partitions_fingerprinted`
_FINGERPRINTED_BATCH_BYTES = 16 << 20


class StoreView:
    """A read-only view of a store at one generation.

    Every read of a view sees exactly that generation, whatever is committed later.
    `Store.at(g)`, `Store.as_of(t)` and `Store.pinned()` return views; the digest and
    every door accept them as well as a `Store`.
    """

    def __init__(self, log: Log, snapshot: Snapshot, clock: Clock, *,
                 travelled: bool = False):
        self._log = log
        self._snap = snapshot
        self._clock = clock
        # an older generation (time travel): its derived files may have been vacuumed
        self._travelled = travelled
        self._seen_of: Snapshot | None = None
        self._seen_snap: Snapshot | None = None

    @property
    def _seen(self) -> Snapshot:
        """The pinned generation as this code may read it: derived state that other code
        wrote, or (time travel) whose files a vacuum removed, is hidden
        (`memframe.store.derived`)."""
        snap = self._snap
        if self._seen_of is not snap:
            root = self._log.root if self._travelled else None
            self._seen_snap, self._seen_of = derived.visible(
                snap, root, lambda path: self._log.part_size(path) is not None), snap
        return self._seen_snap  # type: ignore[return-value]

    @property
    def vacuumed_marks(self) -> Mapping[str, Any]:
        """The derived watermarks this generation recorded when a vacuum has since removed
        files of its derived state (time travel), so that state is hidden: a door folds
        from the canonical rows up to these marks instead. Empty otherwise."""
        if not self._travelled or self._seen is self._snap \
                or not derived.current(self._snap.watermarks):
            return {}
        return {m: v for m, v in self._snap.watermarks.items() if derived.is_derived(m)}

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

    @property
    def counters(self) -> Mapping[str, Any]:
        """The log's counters at this generation: ``seq`` (the last row's), ``capsules``,
        ``sessions``, ``audit_seq`` and ``chain`` (the journal's last hash)."""
        return dict(self._snap.counters)

    def pinned(self) -> StoreView:
        return self

    def io_counts(self) -> dict[str, int] | None:
        """For a store on object storage, the requests made and bytes moved so far by this
        handle and its views (``requests``, ``bytes_read``, ``bytes_written``); None for a
        local store."""
        remote = getattr(self._log, "objects", None)
        return None if remote is None else remote.counts()

    def read(self, fn: Callable[[StoreView], Any]) -> Any:
        """``fn(self)``: a frozen view never moves on (`Store.read` re-pins on a newer
        generation when a vacuum removes what a call reads)."""
        return fn(self)

    def now(self) -> datetime.datetime:
        """The injected clock's "now" (used by the digest's time-dependent fields)."""
        return _checked_now(self._clock)

    @property
    def watermarks(self) -> Mapping[str, Any]:
        return self._seen.watermarks

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
        if name not in S.CANONICAL_TABLES:
            raise InvalidInputError(
                f"unknown table {name!r}; the canonical tables are: "
                f"{', '.join(S.CANONICAL_TABLES)}"
            )
        parts = self._seen.parts(name)
        return tables.scan(self._here(parts), parts, S.table_schema(name))

    def tables(self) -> dict[str, pl.LazyFrame]:
        """All canonical tables at this generation (name -> LazyFrame)."""
        return {name: self.table(name) for name in S.CANONICAL_TABLES}

    def derived(self, name: str, schema: pl.Schema) -> pl.LazyFrame:
        """A derived table (e.g. ``projections/session``) at this generation."""
        parts = self._seen.parts(name)
        return tables.scan(self._here(parts), parts, schema)

    def read_matching(self, name: str, schema: pl.Schema, column: str, values: Sequence[str],
                      columns: Sequence[str] | None = None) -> tuple[pl.DataFrame, int]:
        """Rows of ``name`` whose ``column`` is in ``values`` and the Parquet rows read."""
        parts = self._seen.parts(name)
        return tables.read_matching(self._here(parts), parts, schema, column, values, columns)

    def read_by_seq(self, name: str, seqs: Sequence[int], columns: Sequence[str]
                    ) -> tuple[pl.DataFrame, int]:
        """Rows of ``name`` whose ``seq`` is in ``seqs`` (reading only the row groups that can
        hold them) and the Parquet rows read."""
        parts = self._seen.parts(name)
        return tables.read_by_seq(self._here(parts), parts, S.table_schema(name), seqs, columns)

    def row_count(self, name: str) -> int:
        """Rows in a table's partitions at this generation (from the log, nothing read)."""
        return sum(p.rows for p in self._seen.parts(name))

    def files(self, name: str) -> list[Path]:
        """The partition files of a table at this generation."""
        parts = self._seen.parts(name)
        return [self._here(parts) / p.path for p in parts]

    # -- partitions: the read side of incremental jobs ------------------------------------
    def partitions(self, name: str) -> tuple[Partition, ...]:
        """The partitions of a table (canonical or derived) at this generation, in order.

        A `Partition` names one immutable file (``path``, relative to the store, an
        identity) and carries its ``rows`` and ``seq_lo``/``seq_hi`` from the log, so an
        incremental job reads only what is above its watermark, through
        `read_partitions`, without touching a file path.

        Examples:
            >>> import memframe as mf, tempfile, os
            >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
            >>> _ = store.ingest({"content": "hello", "source": "note", "anchor": "a"})
            >>> view = store.pinned()
            >>> [(p.rows, p.seq_lo, p.seq_hi) for p in view.partitions("capsules")]
            [(1, 1, 1)]
            >>> new = [p for p in view.partitions("capsules") if (p.seq_hi or 0) > 0]
            >>> view.read_partitions("capsules", new, ["id"])["id"].to_list()
            ['cap-1']
        """
        return self._seen.parts(name)

    def read_partitions(self, name: str, partitions: Sequence[Partition],
                        columns: Sequence[str] | None = None, *,
                        schema: pl.Schema | None = None) -> pl.DataFrame:
        """The rows of ``partitions`` of table ``name`` (a derived table names its
        ``schema``); an empty frame when there are none."""
        return tables.read(self._here(partitions), partitions,
                           schema if schema is not None else S.table_schema(name), columns)

    def scan_partitions(self, name: str, partitions: Sequence[Partition], *,
                        schema: pl.Schema | None = None) -> pl.LazyFrame:
        """A LazyFrame over ``partitions`` of table ``name`` (empty when there are none)."""
        return tables.scan(self._here(partitions), partitions,
                           schema if schema is not None else S.table_schema(name))

    def read_partitions_fingerprinted(
        self, name: str, partitions: Sequence[Partition], columns: Sequence[str]
    ) -> list[tuple[pl.DataFrame, dict[str, Any]]]:
        """Each partition's rows, parsed from the very bytes fingerprinted (sha256 and file
        identity: `memframe.store.fingerprint`), so what was read is what is recorded."""
        schema = S.table_schema(name)
        cast = pl.Schema({c: schema[c] for c in columns})
        out: list[tuple[pl.DataFrame, dict[str, Any]]] = []
        root = self._here(partitions)
        batch: list[tuple[Partition, bytes, dict[str, Any]]] = []

        def parse() -> None:
            # one parse for a batch of files (a stream of commits leaves hundreds of
            # one-row parts: ~0.6 ms each parsed alone, ~0.06 ms together), cut back
            # into files by the rows the log says each holds; when the rows are not
            # those, each file is parsed alone (and a damaged one named)
            if len(batch) > 1:
                try:
                    whole = pl.read_parquet([data for _p, data, _f in batch],
                                            columns=list(columns))
                except (OSError, pl.exceptions.PolarsError):
                    whole = None
                if whole is not None and whole.height == sum(p.rows for p, _d, _f in batch):
                    whole, at = whole.cast(cast), 0
                    for part, _data, print_ in batch:
                        out.append((whole.slice(at, part.rows), print_))
                        at += part.rows
                    batch.clear()
                    return
            for _part, data, print_ in batch:
                frame = pl.read_parquet(io.BytesIO(data), columns=list(columns))
                out.append((frame.cast(cast), print_))
            batch.clear()

        held = 0
        for part in partitions:
            data, print_ = fingerprint.read_fingerprinted(root / part.path)
            batch.append((part, data, print_))
            held += len(data)
            if held >= _FINGERPRINTED_BATCH_BYTES:
                parse()
                held = 0
        parse()
        return out

    def partition_fingerprint(self, partition: Partition | str) -> dict[str, Any]:
        """The fingerprint of one partition file now (sha256 and identity)."""
        path = partition if isinstance(partition, str) else partition.path
        return fingerprint.file_fingerprint(self._here_path(path) / path)

    def partition_identity(self, partition: Partition | str) -> dict[str, Any] | None:
        """One partition file's identity now (size, inode, mtime, ctime; nothing read), or
        None when it cannot be stat'ed."""
        path = partition if isinstance(partition, str) else partition.path
        return fingerprint.current_identity(f"{self._here_path(path)}{os.sep}{path}")

    def partition_is(self, partition: Partition | str, recorded: Mapping[str, Any]) -> bool:
        """Whether a partition file is the very file a recorded fingerprint describes."""
        path = partition if isinstance(partition, str) else partition.path
        return self._log.same_file(path, dict(recorded))

    def partition_size(self, path: str) -> int | None:
        """One partition file's size in bytes (None when it is missing), nothing read."""
        return self._log.part_size(path)

    def derived_names(self, prefix: str) -> list[str]:
        """The derived tables under ``prefix`` that hold partitions at this generation
        (e.g. the levels or tiers a projection keeps), sorted."""
        return sorted(t for t, parts in self._seen.tables.items()
                      if parts and t.startswith(prefix))

    def row_group_ranges(self, partition: Partition, column: str, *, physical: bool = False
                         ) -> tuple[list[Any], list[Any], list[int]]:
        """Per row group of one partition: the min and max of ``column`` (None without
        statistics) and its row count, from the footer (nothing else read), so a lookup
        can plan which groups to read. ``physical``: the values as stored (a timestamp's
        integer count of nanoseconds)."""
        _meta, mins, maxs, counts = tables.row_group_ranges(
            self._here([partition]) / partition.path, column, physical)
        return mins, maxs, counts

    def read_row_groups(self, partition: Partition, groups: Sequence[int],
                        schema: pl.Schema, where: pl.Expr | None = None) -> pl.DataFrame:
        """The given row groups of one partition, as ``schema``'s columns; only the rows
        ``where`` holds (None: all), filtered as each group is read."""
        return tables.read_row_groups(self._here([partition]), partition, groups, schema,
                                      where)

    def _here(self, parts: Iterable[Part]) -> Path:
        """The store's root, with ``parts`` present under it (a remote store's mirror
        fetches those it lacks, in parallel, before they are read)."""
        self._log.ensure(parts)
        return self._log.root

    def _here_path(self, path: str) -> Path:
        return self._here([Part(path=path, rows=0)])

    def _all_parts(self) -> list[Part]:
        return [p for parts in self._seen.tables.values() for p in parts]

    def readable(self) -> bool:
        """Whether every partition this generation names is present (time travel reaches
        a generation until a vacuum removes files it needs)."""
        return all(self._log.part_size(p.path) is not None for p in self._all_parts())

    def require_readable(self) -> None:
        """Raise `GenerationNotFoundError` naming the first partition of this generation
        a vacuum removed (or that is missing), and the generations still readable."""
        tables.require_present(self._log.root, [p for p in self._all_parts()
                                                if self._log.part_size(p.path) is None])

    def capsule_state(self) -> pl.LazyFrame:
        """One row per capsule: status, usage, kind, tier and the capsule's columns."""
        return fold_capsule_state(self.tables())

    def diff(self, since: Any, until: Any = None) -> StoreDiff:
        """What changed from ``since`` to ``until`` (default: this view's generation).

        Args:
            since, until: a generation number, an aware ``datetime`` (as `as_of`) or a view
                of this store (``store.at(g)``).

        Returns:
            A `memframe.store.diff.StoreDiff`: ``capsules`` (added or changed, with the
            state columns that changed), ``fields`` (before and after, as text),
            ``rows(table)`` (the canonical rows appended), ``summary`` and
            ``rows_visited``.

        Examples:
            >>> import memframe as mf, tempfile, os
            >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
            >>> [a] = store.ingest({"content": "x", "source": "s", "anchor": "a"})
            >>> store.record_recall([a])
            >>> d = store.diff(1)
            >>> d.capsules.rows(), d.summary
            ([('cap-1', 'changed', ['last_recalled_at', 'recall_count'], 'default')], {'recalled': 1})
        """
        from memframe.store.diff import StoreDiff

        view = self.pinned()
        first = _bound(view, since, "since")
        last = view if until is None else _bound(view, until, "until")
        if first.generation > last.generation:
            raise InvalidInputError(f"since (generation {first.generation}) is after until "
                                    f"(generation {last.generation}); swap them")
        # refused even when the range added no rows: the first generation's state is
        # what the diff compares against, and it is gone (the answer must not depend on luck)
        first.require_readable()
        last.require_readable()
        try:
            return StoreDiff(first, last)
        except _VANISHED + _READ_FAULTS:
            # a vacuum removed a file of either generation while the diff read it (another
            # handle replaced it): say so, and which generations are still readable
            first.require_readable()
            last.require_readable()
            raise

    # -- time travel ----------------------------------------------------------------------
    def at(self, generation: int) -> StoreView:
        """A frozen view of the store as it was at ``generation``."""
        if not isinstance(generation, int) or isinstance(generation, bool):
            raise InvalidInputError(f"generations are integers; got {generation!r}")
        return StoreView(self._log, self._log.snapshot(generation), self._clock,
                         travelled=True)

    def generation_of(self, seq: int) -> int:
        """The generation that committed the canonical row numbered ``seq`` (every
        canonical row carries its ``seq``); refused for a row this view does not hold.

        Examples:
            >>> import memframe as mf, tempfile, os
            >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
            >>> _ = store.ingest({"content": "x", "source": "s", "anchor": "a"})
            >>> sid = store.session_start("team")
            >>> seq = store.table("brackets").collect()["seq"].item()
            >>> store.generation_of(seq) == store.generation
            True
        """
        if not isinstance(seq, int) or isinstance(seq, bool):
            raise InvalidInputError(f"seq is an integer (a row's seq column); got {seq!r:.60}")
        last = int(self.snapshot.counter("seq"))
        found = self._log.generation_for_seq(seq) if 0 < seq <= last else 0
        if not found or found > self.generation:
            raise InvalidInputError(f"no canonical row has seq {seq} at generation "
                                    f"{self.generation} (its rows hold seq 1..{last})")
        return found

    def as_of(self, instant: datetime.datetime | str) -> StoreView:
        """A frozen view of the newest generation committed at or before ``instant``."""
        if instant is None:
            raise InvalidInputError("as_of needs an instant (a datetime or ISO 8601 text); got None")
        instant = parse_instant(instant, "as_of")
        return self.at(self._log.generation_for_instant(_commit_stamp(instant)))

    # -- display --------------------------------------------------------------------------
    def _summary_rows(self) -> list[tuple[str, int, int]]:
        return [(name, self.row_count(name), len(self._seen.parts(name)))
                for name in S.CANONICAL_TABLES]

    def __repr__(self) -> str:
        kind = type(self).__name__
        lines = [f"<memframe {kind} {str(self.path)!r} generation={self.generation}>"]
        for name, rows, parts in self._summary_rows():
            if rows:
                lines.append(f"  {name:<16} {rows:>10,} rows in {parts} partition(s)")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        from memframe._render import store_html  # the leaf renderer

        return store_html(type(self).__name__, str(self.path), self.generation,
                          self.committed_at, self._summary_rows())

    # -- projections ----------------------------------------------------------------------
    @property
    def memory(self) -> Memory:
        """The projection doors (spec 000): sessions, session_digest, episodes, cycle, ..."""
        from memframe.jobs import Memory  # the one import upward: jobs sit above store

        return Memory(self)

    # -- writes are refused on views -----------------------------------------------------
    def _rewriting(self) -> contextlib.AbstractContextManager[None]:
        """See `Store._rewriting` (a view commits nothing)."""
        return contextlib.nullcontext()

    def _refuse(self, *_: Any, **__: Any) -> Any:
        raise ReadOnlyStoreError(
            f"this is a frozen view of generation {self.generation}; write through "
            f"mf.Store.open({str(self.path)!r})"
        )

    def commit(self, fn: Callable[[capture.Commit], Any], *, operation: str) -> Any:
        return self._refuse()

    ingest = relate = forget = record_recall = record_miss = record_lane_override = _refuse
    classify = session_start = session_finish = record_git_scan = transaction = _refuse
    append = compact = _compact_tail = vacuum = review = pin = _refuse


def _vacuum_report(snap: Snapshot, doomed: list[tuple[Path, str, str]],
                   sizes: dict[str, int], before: int | None, after: int | None, *,
                   dry_run: bool, retention_hours: float) -> dict[str, Any]:
    """`Store.vacuum`'s answer for what its survey found (removed, or that would be)."""
    removed = {"partitions": 0, "temporary": 0}
    for _full, _rel, kind in doomed:
        removed["partitions" if kind == "partition" else kind] += 1
    newest = snap.generation
    return {
        **removed,
        "files": sorted(rel for _, rel, _ in doomed),
        "bytes": sum(sizes[rel] for _, rel, _ in doomed),
        "readable": [after, newest] if newest and after is not None else [],
        "no_longer_readable": ([before, after - 1] if newest and before is not None
                               and after is not None and after > before else None),
        "retention_hours": float(retention_hours),
        "dry_run": dry_run,
    }


def _checked_now(clock: Clock) -> datetime.datetime:
    now = clock()
    if not isinstance(now, datetime.datetime):
        raise MemframeError(f"the store's clock returned {now!r}; it must return a datetime")
    if now.tzinfo is None:
        raise MemframeError("the store's clock returned a naive datetime; return an aware one "
                            "(e.g. datetime.now(timezone.utc))")
    return check_instant(now.astimezone(datetime.UTC), "the store's clock")


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
        self._deferred = False  # the last _land stood aside for another writer's ticket
        self._losers_first = True  # a new commit waits for writers that lost (`_rewriting`)
        self._delta = DeltaLogs(log)
        super().__init__(log, log.snapshot(), self._clock)

    @classmethod
    def create(cls, path: str | os.PathLike[str], *, clock: Clock | None = None,
               actor: str = "memframe", exist_ok: bool = False,
               delta_logs: bool = False) -> Store:
        """Create a new, empty store at ``path`` (which must be absent or empty); with
        ``exist_ok=True``, open the store already there instead (open-or-create).
        ``delta_logs=True`` also keeps every canonical table readable as a Delta Lake
        table (`Store.sync_delta_logs`)."""
        if not isinstance(delta_logs, bool):
            raise InvalidInputError(f"delta_logs is True or False; got {delta_logs!r:.40}")
        if objects.is_url(path):
            directory = objects.local_path(str(path))
            if directory is None:
                raise InvalidInputError(f"a store is created in a directory; create it "
                                        f"locally and publish it with store.push({str(path)!r})")
            path = directory
        store = cls(Log.create(Path(path), exist_ok=exist_ok), clock, actor)
        if delta_logs:
            store.sync_delta_logs()
        return store

    @staticmethod
    def is_store(path: str | os.PathLike[str]) -> bool:
        """Whether ``path`` is a memframe store directory (it holds the store's marker).

        Examples:
            >>> import memframe as mf, tempfile, os
            >>> root = tempfile.mkdtemp()
            >>> mf.Store.is_store(root), mf.Store.is_store(mf.Store.create(root + "/s").path)
            (False, True)
        """
        root = Path(path)
        return root.is_dir() and (root / log_module.MARKER).is_file()

    @classmethod
    def open(cls, path: str | os.PathLike[str], *, clock: Clock | None = None,
             actor: str = "memframe", storage_options: Mapping[str, Any] | None = None,
             cache_dir: str | os.PathLike[str] | None = None) -> Store:
        """Open an existing store; a teaching error if ``path`` is not one.

        ``path`` is a directory, or the URL of a store published on object storage
        (``s3://bucket/prefix/store``, ``gs://``, ``az://``; ``file://`` is a directory).
        A remote store is a `RemoteStore`: every read works on it, reading through a local
        mirror of the generations it pins (under ``cache_dir``, default
        ``$MEMFRAME_CACHE_DIR`` or ``~/.cache/memframe``); its verbs are refused. The
        endpoint and credentials come from ``storage_options`` (``{"endpoint": ...,
        "access_key_id": ..., "secret_access_key": ..., "region": ..., "allow_http":
        True}``) or from the standard environment variables (``AWS_ENDPOINT_URL``,
        ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``,
        ``AWS_ALLOW_HTTP``).
        """
        if objects.is_url(path):
            assert isinstance(path, str)
            directory = objects.local_path(path)
            if directory is None:
                return RemoteStore(open_mirror(path, storage_options, cache_dir), clock, actor)
            path = directory
        elif storage_options is not None:
            raise InvalidInputError(f"storage_options are for a store URL (s3://, gs://, "
                                    f"az://); {str(path)!r:.80} is a local path")
        return cls(Log.open(Path(path)), clock, actor)

    def push(self, url: str, *, storage_options: Mapping[str, Any] | None = None,
             progress: bool = False) -> dict[str, Any]:
        """Publish this store at ``url`` (object storage, or a ``file://`` directory).

        Generations are replicated in order: the partition files first, then each
        generation file, created only if no other push created it (a conditional put), so
        readers of the remote copy see whole generations, and a push that dies resumes
        with the next call. Partition files a local vacuum removed (compacted or erased
        rows) are deleted remotely too; until the next push, the remote keeps what the last
        one left. Credentials as for `Store.open`.

        Returns:
            ``url``, ``generation`` (the newest pushed), ``generations_pushed`` (``[first,
            last]`` or None when the remote was current), ``files`` and ``bytes``
            uploaded, ``deleted`` (files removed remotely), and the ``requests`` made.

        Examples:
            >>> import memframe as mf, tempfile, os
            >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
            >>> _ = store.ingest({"content": "x", "source": "s", "anchor": "a"})
            >>> url = "file://" + tempfile.mkdtemp() + "/copy"
            >>> store.push(url)["generations_pushed"], store.push(url)["generations_pushed"]
            ([1, 1], None)
            >>> mf.Store.open(url).table("capsules").collect()["content"].to_list()
            ['x']
        """
        from memframe.store.push import push_log

        return push_log(self._log, url, storage_options, progress=progress)

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
        return self.pinned().watermarks

    def pinned(self) -> StoreView:
        """A frozen view of the newest generation (what one call should read)."""
        return StoreView(self._log, self._refresh(), self._clock)

    def read(self, fn: Callable[[StoreView], Any]) -> Any:
        """Run ``fn(view)`` on a view pinned to the newest generation and return its result.

        If files that generation names vanish while ``fn`` reads them (a compaction or an
        erasure replaced them and a vacuum removed them), ``fn`` runs again on the newer
        generation instead of failing. A file missing from the newest generation itself
        is damage, and is reported.

        Examples:
            >>> import memframe as mf, tempfile, os
            >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
            >>> store.read(lambda view: view.generation)
            0
        """
        for attempt in range(_MAX_READ_ATTEMPTS):
            view = self.pinned()
            try:
                return fn(view)
            except _VANISHED + _READ_FAULTS as exc:
                if not self._moved_past(view.generation):
                    found = self.explain_fault(exc, view.snapshot)
                    if found is exc:
                        raise
                    raise found from exc
                self._backoff(attempt)
        return fn(self.pinned())

    def explain_fault(self, exc: BaseException, snap: Snapshot) -> BaseException:
        """What to raise for a read that failed on the newest generation ``snap``: the
        teaching error naming the first file of it that cannot be read (and the fix), or
        ``exc`` itself when every file is whole (its own meaning stands)."""
        if isinstance(exc, InvalidInputError):
            return exc  # the caller's input, not a file
        self._log.ensure(p for parts in snap.tables.values() for p in parts)
        found = tables.diagnose(self._log.root, snap.tables)
        return exc if found is None else found

    def _moved_past(self, generation: int) -> bool:
        """Whether a newer generation than ``generation`` has landed (so a file the older
        one named may have been replaced and vacuumed: worth running again)."""
        return self._log.latest_generation(known=generation) != generation

    def table(self, name: str) -> pl.LazyFrame:
        return self.read(lambda v: v.table(name))

    def tables(self) -> dict[str, pl.LazyFrame]:
        return self.read(lambda v: v.tables())

    def derived(self, name: str, schema: pl.Schema) -> pl.LazyFrame:
        return self.read(lambda v: v.derived(name, schema))

    def read_matching(self, *args: Any, **kwargs: Any) -> tuple[pl.DataFrame, int]:
        return self.read(lambda v: v.read_matching(*args, **kwargs))

    def read_by_seq(self, *args: Any, **kwargs: Any) -> tuple[pl.DataFrame, int]:
        return self.pinned().read_by_seq(*args, **kwargs)

    def row_count(self, name: str) -> int:
        return self.pinned().row_count(name)

    def files(self, name: str) -> list[Path]:
        return self.pinned().files(name)

    def partitions(self, name: str) -> tuple[Partition, ...]:
        return self.pinned().partitions(name)

    def derived_names(self, prefix: str) -> list[str]:
        return self.pinned().derived_names(prefix)

    @property
    def counters(self) -> Mapping[str, Any]:
        return self.pinned().counters

    def readable(self) -> bool:
        return self.pinned().readable()

    def damaged_derived(self) -> CorruptStoreError | None:
        """The teaching error of the first derived file (projection, kept digest state) of
        the newest generation that cannot be read, or None when all are whole: what the
        cycle checks before it runs, to write them again (a few bytes read per file)."""
        snap = self._refresh()
        return tables.diagnose(self._log.root, {t: p for t, p in snap.tables.items()
                                                if derived.is_derived(t)})

    def capsule_state(self) -> pl.LazyFrame:
        return self.read(lambda v: v.capsule_state())

    def _summary_rows(self) -> list[tuple[str, int, int]]:
        return self.pinned()._summary_rows()

    # -- committing -----------------------------------------------------------------------
    def _new_commit(self, snap: Snapshot, cache: dict[str, Any] | None = None,
                    early: contextlib.ExitStack | None = None) -> capture.Commit:
        """A commit on ``snap``. Given ``early`` (the attempt's scope), the commit may
        write whole partitions before it lands (`Commit.flush`): under the commit lock,
        held shared from its first such file to the end of the attempt, so a vacuum never
        takes a file no generation names yet."""
        self._indexes.refresh(snap)
        root = self._log.root
        counter = iter(range(1 << 30))

        def write_part(table: str, frame: pl.DataFrame) -> tuple[Path, dict[str, Any]]:
            assert early is not None
            n = next(counter)
            if n == 0:
                early.enter_context(self._log.writing())
            rel = tables.part_path(table, snap.generation + 1, n)
            try:
                with log_module.storage_errors(root, "memframe could not write a partition"):
                    part = tables.write_part(root, rel, frame)
            except BaseException:
                (root / rel).unlink(missing_ok=True)  # a file cut short by the failure
                raise
            return root / rel, {"table": table, **part.to_json()}

        def read_part(part: Part) -> pl.DataFrame:
            # partitions are immutable: a retry of the same commit reads each one once
            if cache is not None and part.path in cache:
                return cache[part.path]
            frame = self._read_pinned_part(snap, part)
            if cache is not None:
                cache[part.path] = frame
            return frame

        return capture.Commit(
            snap,
            self._indexes,
            now=_checked_now(self._clock),
            actor=self._actor,
            read_part=read_part,
            view=lambda: StoreView(self._log, snap, self._clock),
            write_part=write_part if early is not None else None,
        )

    def _read_pinned_part(self, snap: Snapshot, part: Part) -> pl.DataFrame:
        if not (self._log.root / part.path).exists():
            raise _StaleSnapshot(part.path)  # replaced and vacuumed: retry on a newer generation
        return tables.read(self._log.root, [part], S.table_schema(part.path.split("/")[0]))

    def commit(self, fn: Callable[[capture.Commit], Any], *, operation: str) -> Any:
        """Run ``fn`` against the newest generation and land what it staged as the next one.

        This is the store's one write path: every verb, the projection jobs, the importer
        and the distributed landing call it. ``fn`` receives a `Writer` pinned to the
        newest generation, stages rows through it (``writer.ingest(...)``,
        ``writer.append(table, rows)``, ``writer.write_derived(...)``, ...) and returns a
        result. Everything staged lands as one generation, or nothing does. A writer that
        loses the race for the next generation re-reads and runs ``fn`` again, so seqs and
        ids are reassigned against what won: ``fn`` must stage from what the writer shows,
        not from state captured outside it.

        A bulk load may call ``writer.flush(table)`` after staging a batch: the table's
        rows that fill whole partitions are written at once (the files landing would
        write), so the commit holds about a partition per table, not the load. They are
        linked when the commit lands and removed when it does not; from the first of them
        to the end of the attempt the commit lock is held shared, so a vacuum waits. The
        nMEMORY import loads this way.

        Args:
            fn: ``fn(writer) -> result``; it may run more than once.
            operation: the name the generation file records (e.g. ``"memory_projections"``).

        Returns:
            What ``fn`` returned on the attempt that landed.

        Examples:
            >>> import memframe as mf, tempfile, os
            >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
            >>> store.commit(lambda w: w.ingest({"content": "x", "source": "s", "anchor": "a"}),
            ...              operation="my_job")
            ['cap-1']
            >>> store.history()["operation"][-1]
            'my_job'
        """
        if not isinstance(operation, str) or not operation.strip():
            raise InvalidInputError("commit(fn, operation=...) needs a non-blank operation name")
        if self._tx is not None:
            return self._tx.run(fn)
        # Fair commits. A writer that loses the race re-runs ``fn`` on the newer generation
        # (its reads of unchanged partitions come from ``cache``) and rebases what it
        # staged: a file it wrote for a lost attempt whose rows come out the same (a
        # rewrite of partitions the winners did not touch) is linked as it is, so a retry
        # costs a small commit's time, not the rewrite's. Only a true conflict (the
        # winners replaced what it read) writes again; after _TICKET_AFTER losses it takes
        # the fairness ticket, and new commits wait behind it (bounded).
        cache: dict[str, Any] = {}  # reads of one commit across its attempts
        kept: list[_Kept] = []
        with self._lock:
            try:
                return self._commit_fairly(fn, operation, cache, kept)
            finally:
                for k in kept:  # files of lost attempts no generation names
                    k.path.unlink(missing_ok=True)

    def _commit_fairly(self, fn: Callable[[capture.Commit], Any], operation: str,
                       cache: dict[str, Any], kept: list[_Kept], lost: int = 0
                       ) -> Any:
        """`commit`'s attempts (see there); ``lost``: races the caller lost already."""
        ticket: int | None = None
        loser: int | None = None  # this writer's losers-first mark (`Log.mark_loser`)
        deferred = False  # this commit stood aside for a ticket once (never more)
        rewrites = False  # the last attempt rewrote files or derived state (a true conflict)
        try:
            for attempt in range(lost, _MAX_ATTEMPTS):
                if attempt == 0:
                    if self._losers_first:  # commits that lost a race go first (bounded)
                        self._log.wait_for_losers()
                elif loser is None:  # lost a race: marked until this commit ends
                    loser = self._log.mark_loser()
                if ticket is None and attempt >= _TICKET_AFTER and (
                        rewrites or attempt >= _APPEND_TICKET):
                    ticket = self._log.take_ticket(log_module.TICKET_WAIT_SECONDS)
                    if ticket is not None:  # commits that passed before it land first
                        self._log.drain(1.0)
                if ticket is None:
                    self._log.wait_for_ticket()  # another writer's turn first (bounded)
                snap = self._refresh()
                # the attempt's scope: a commit that writes partitions early (an import)
                # holds the commit lock shared from its first such file to the attempt's end
                with contextlib.ExitStack() as early:
                    commit = self._new_commit(snap, cache, early)
                    try:
                        result = _staged_by(fn, commit)
                    except _StaleSnapshot:
                        self._backoff(attempt)
                        continue
                    except _VANISHED + _READ_FAULTS as exc:
                        if not self._moved_past(snap.generation):
                            found = self.explain_fault(exc, snap)
                            if found is exc:
                                raise
                            raise found from exc
                        self._backoff(attempt)  # read a file a vacuum removed: run on the newer
                        continue
                    except UnicodeEncodeError as exc:
                        raise _not_unicode(exc) from None
                    if commit.empty:
                        return result
                    rewrites = bool(commit.rewrites or commit.derived or commit.erased)
                    defer = ticket is None and not deferred
                    if self._land(commit, operation, kept, defer=defer, cache=cache):
                        return commit.relabel(result, self._snap.generation)
                    deferred = deferred or (defer and self._deferred)
                    self._backoff(attempt)
            raise ConcurrentCommitError(
                f"gave up after {_MAX_ATTEMPTS} attempts: other writers kept committing first; "
                f"retry later or serialise the writers"
            )
        finally:
            self._log.release_ticket(ticket)
            self._log.release_ticket(loser)

    @contextlib.contextmanager
    def _rewriting(self) -> Iterator[None]:
        """Commits made inside go ahead of writers that lost a race instead of waiting for
        them: for the maintenance verbs (an erasure, a compaction, the cycle), whose first
        attempt is long and which take the fairness ticket after one loss anyway; losers
        first is for the small commits' race among themselves."""
        before, self._losers_first = self._losers_first, False
        try:
            yield
        finally:
            self._losers_first = before

    @staticmethod
    def _backoff(attempt: int) -> None:
        time.sleep(random.uniform(0, 0.002 * min(attempt + 1, 20)))

    def _land(self, commit: capture.Commit, op: str, kept: list[_Kept] | None = None, *,
              defer: bool = False, cache: dict[str, Any] | None = None) -> bool:
        """Write the commit's partitions and link its generation; False if another won.

        The files are written and made durable (file and directory fsync) before the
        generation that names them links, under the shared commit lock, so a vacuum can
        never remove them in between: a generation never names a missing file.
        """
        snap = commit.snapshot
        self._deferred = False
        if commit.erased and not _stage_erased_text(self._log.root, commit, cache):
            return False  # a text table's part is gone: a newer generation replaced it
        generation = snap.generation + 1
        # partitions the commit wrote early (`Commit.flush`) come first in the entry
        written: list[Path] = [path for path, _add in commit.flushed]
        adds: list[tuple[int, dict[str, Any]]] = [
            (i - len(commit.flushed), add) for i, (_path, add) in enumerate(commit.flushed)]
        removes: list[str] = []
        root = self._log.root
        # a large commit writes its files on two threads (the Parquet encoder releases the
        # interpreter), and its journal's hash chain runs while the other tables are written
        staged_rows = sum(f.height for fs in commit.frames.values() for f in fs)
        pool = (concurrent.futures.ThreadPoolExecutor(2, thread_name_prefix="memframe-write")
                if staged_rows >= _PARALLEL_WRITE_ROWS else None)
        pending: list[concurrent.futures.Future[None]] = []
        counter = iter(range(1 << 30))
        reused: list[_Kept] = []
        fresh: list[_Kept] = []
        # the parts of rows this commit appends (their seqs are its own): n -> table, file,
        # rows
        appended: dict[int, tuple[str, Path, pl.DataFrame]] = {}

        def put(table: str, frame: pl.DataFrame | SpilledRows, *, validate: bool = False,
                own: bool = False, **kwargs: Any) -> None:
            n = next(counter)
            same = (None if isinstance(frame, SpilledRows)  # copied again, never compared
                    else _reusable(kept, reused, table, frame, kwargs))
            if same is not None:  # rebased: the file a lost attempt wrote holds these rows
                reused.append(same)
                adds.append((n, dict(same.add)))
                if own and isinstance(frame, pl.DataFrame):
                    appended[n] = (table, same.path, frame)
                return
            rel = tables.part_path(table, generation, n)
            written.append(root / rel)
            if own and isinstance(frame, pl.DataFrame):
                appended[n] = (table, root / rel, frame)

            def write() -> None:
                checked = (S.validate_frame(table, frame)
                           if validate and isinstance(frame, pl.DataFrame) else frame)
                part = tables.write_part(root, rel, checked, **kwargs)
                add = {"table": table, **part.to_json()}
                adds.append((n, add))
                if kept is not None and isinstance(frame, pl.DataFrame):
                    fresh.append(_Kept(root / rel, table, frame, dict(kwargs), add))

            if pool is None:
                write()
            else:
                pending.append(pool.submit(write))

        def put_table(table: str, frames: list[pl.DataFrame]) -> None:
            whole = pl.concat(frames, how="vertical") if len(frames) > 1 else frames[0]
            # bounded partitions: an erasure rewrites one of them, not a whole bulk load
            for piece in tables.partition_slices(table, whole):
                put(table, piece, own=True)

        def renumber(staged: dict[str, Any], moved: dict[str, Any], old: Snapshot,
                     new: Snapshot) -> dict[str, Any]:
            """``moved`` (``staged``, the entry on ``old``, as `Log.rebase` put it on top of
            ``new``) with this commit's own rows renumbered past the rows ``new`` added
            since ``old``: their ``seq``, the journal's ``audit_seq`` and its links from
            ``new``'s chain tail (written again: a part's file holds its rows' seqs)."""
            shift = int(new.counter("seq")) - int(old.counter("seq"))
            audit_shift = int(new.counter("audit_seq")) - int(old.counter("audit_seq"))
            # new capsules moved past winners' new capsules take the ids after theirs
            above = int(old.counter("capsules"))
            id_shift = int(new.counter("capsules")) - above if movable else 0
            commit.capsule_shift += id_shift
            # ids this commit issued, on top of the newer generation's (the commits it is
            # moved past issued none of the kind it issued, or it moved its capsules' ids
            # past theirs: `Log.rebase`, `Commit.moves_past_capsules`)
            ids = {name: int(new.counter(name)) + int(staged["counters"][name])
                   - int(old.counter(name)) for name in ("capsules", "sessions")}
            # what staging again would record: the newer generation's marks (a commit
            # moved past others' marks set none of its own: `Commit.appends_fresh`)
            marks = (moved["watermarks"] if new.watermarks == old.watermarks else
                     derived.settle(new, derived.visible(new).watermarks, False)[0])
            if shift or audit_shift:  # else nothing moved: the files stay right
                prev = str(new.counter("chain", ""))
                place = {n: i for i, (n, _add) in enumerate(adds)}
                renumbered: dict[str, list[pl.DataFrame]] = {}
                for n, (table, path, frame) in sorted(appended.items()):
                    moves = [pl.col("seq") + shift]
                    if id_shift:
                        moves += [capture.moved_ids(column, above, id_shift)
                                  for column in capture.ID_COLUMNS[table]]
                    if table == "journal":
                        moves.append(pl.col("audit_seq") + audit_shift)
                    frame = frame.with_columns(moves)  # one pass over the frame
                    if table == "journal":
                        hashes = capture.chain_hashes(prev, journal_lines(frame))
                        prev = hashes[-1]
                        frame = S.validate_frame("journal", frame.with_columns(
                            pl.Series("chained_hash", hashes, dtype=pl.String)))
                    else:
                        renumbered.setdefault(table, []).append(frame)
                    rel = tables.part_path(table, moved["generation"], n)
                    written.append(root / rel)
                    add = {"table": table, **tables.write_part(root, rel, frame).to_json()}
                    adds[place[n]] = (n, add)
                    appended[n] = (table, root / rel, frame)
                    # the file it replaces was never linked: removed now (the one written
                    # here is kept like the attempt's others, for a later attempt or removal)
                    path.unlink(missing_ok=True)
                    fresh[:] = [k for k in fresh if k.path != path]
                    reused[:] = [k for k in reused if k.path != path]
                    if kept is not None:
                        fresh.append(_Kept(root / rel, table, frame, {}, add))
                for directory in sorted({p.parent for _t, p, _f in appended.values()}):
                    fsync_dir(directory)
                commit.frames.update(renumbered)  # what the indexes learn when it lands
            else:
                prev = str(staged["counters"]["chain"])
            span = moved.get("seq")
            counters = {**moved["counters"], **ids,
                        "seq": int(staged["counters"]["seq"]) + shift,
                        "audit_seq": int(staged["counters"]["audit_seq"]) + audit_shift,
                        "chain": prev}  # new's own tail when the commit has no journal row
            return {**moved, "watermarks": marks,
                    "add": [add for _, add in sorted(adds, key=lambda a: a[0])],
                    "seq": [span[0] + shift, span[1] + shift] if span else None,
                    "counters": counters}

        def settle() -> None:
            if pool is None:
                return
            done, _ = concurrent.futures.wait(pending)
            pool.shutdown()
            for future in done:
                future.result()  # re-raise the first failure of a write

        def known_dir(directory: Path) -> bool:
            # a table that already has parts has a durable directory entry in the root
            # (asked of the few directories a commit wrote in, not built for every table)
            return directory != root and bool(
                snap.tables.get(directory.relative_to(root).as_posix()))

        with log_module.storage_errors(root, f"memframe could not commit {op}"), \
                self._log.writing():
            try:
                for table, frames in list(commit.frames.items()):
                    if table != "journal":
                        put_table(table, frames)
                if "journal" in commit.frames:  # rows an import carried, chained already
                    put_table("journal", commit.frames["journal"])
                for piece in commit.chain_journal(tables.PART_ROWS):
                    put("journal", piece, validate=True, own=True)
                for old_parts, table, frame in commit.rewrites.values():
                    # a partition an older version wrote larger is split as it is
                    # rewritten: the next erasure near it rewrites a bounded one
                    for piece in tables.partition_slices(table, frame):
                        put(table, piece)
                    removes.extend(p.path for p in old_parts)
                for table, (staged, replace, rg) in commit.derived.items():
                    if replace:
                        removes.extend(p.path for p in snap.parts(table))
                    nonempty = [f for f in staged if f.height]
                    if not nonempty:
                        continue
                    rows = nonempty[0] if isinstance(nonempty[0], SpilledRows) else pl.concat(
                        [f for f in nonempty if isinstance(f, pl.DataFrame)],
                        how="vertical_relaxed")
                    if rg:
                        put(table, rows, row_group_rows=rg)
                    else:
                        put(table, rows)
                settle()
                synced = {p.parent for p in written}
                # a directory this commit made is an entry in its parent: sync up to the root
                for directory in [d for d in synced if not known_dir(d)]:
                    while directory != root and directory.parent not in synced:
                        directory = directory.parent
                        synced.add(directory)
                for directory in sorted(synced):
                    fsync_dir(directory)
                # derived rows over state other code wrote: drop that state in this commit
                marks, stale = derived.settle(snap, commit.watermarks, bool(commit.derived))
                sealed = marks.get(fingerprint.SEAL_MARK)
                if isinstance(sealed, dict) and any(
                        (p.seq_lo or 0) <= int(sealed.get("seq", -1))
                        for old_parts, _t, _f in commit.rewrites.values() for p in old_parts):
                    # canonical parts the seal names rewritten here (an erasure, a
                    # compaction) keep the rows the digest's state folded: seal them again
                    # at their new files (a rewrite of parts above it leaves it as it is)
                    resealed = _reseal(root, snap, adds, removes, marks[fingerprint.SEAL_MARK])
                    if resealed is None:
                        marks.pop(fingerprint.SEAL_MARK)
                    else:
                        marks[fingerprint.SEAL_MARK] = resealed
                known = set(removes)
                removes.extend(p for p in stale if p not in known)
                stamp = _commit_stamp(commit.now)
                if snap.timestamp is not None and stamp < snap.timestamp:
                    stamp = snap.timestamp  # commit stamps never go backwards (as_of bisects)
                first_seq = int(snap.counter("seq")) + 1
                entry: dict[str, Any] = {
                    "generation": generation,
                    "parent": snap.generation,
                    "operation": op,
                    "verbs": commit.operations,
                    "timestamp": stamp,
                    "seq": [first_seq, commit.seq] if commit.seq >= first_seq else None,
                    "add": [add for _, add in sorted(adds, key=lambda a: a[0])],
                    "remove": removes,
                    "counters": commit.counters(),
                    "watermarks": marks,
                    "erases": commit.erases,  # vacuum never keeps erased bytes for time travel
                }
                if commit.compaction:  # what the commit did, never its operation name
                    entry["compaction"] = True
                why = log_module.entry_problem(entry, generation)
                if why is not None:  # never link what every later open would refuse
                    raise InvalidInputError(f"{op} staged a generation the log would refuse "
                                            f"({why}); nothing was written")
                # a generation number a Delta log already mirrors is never linked again
                self._delta.before_link(generation)
                # a writer that took the ticket while this one staged goes first: this
                # attempt stands aside (its files kept for the rebase), once per commit
                self._deferred = defer and self._log.ticket_taken()
                won = not self._deferred and self._log.try_commit(entry)
                base = snap
                hops = 0  # renumbered rebases (each writes its own rows again)
                fresh_rows = commit.appends_fresh
                movable = fresh_rows and commit.moves_past_capsules
                while not won and not self._deferred and (
                        commit.rebasable or ((commit.renumberable or fresh_rows)
                                             and hops < _RENUMBER_HOPS)):
                    # beaten by commits that only appended: link on top of them as staged
                    # (an erasure's own rows renumbered past theirs); new capsules are
                    # renumbered past any commit that added none (`Commit.appends_fresh`)
                    moved = self._log.rebase(entry, base, S.CANONICAL_TABLES,
                                             new_capsules_only=fresh_rows,
                                             capsules_move=movable)
                    if moved is None or (
                            movable and moved[1].counter("capsules") != base.counter("capsules")
                            and self._contents_taken(commit, moved[1])):
                        break  # a true conflict: stage again on the newer generation
                    if not commit.rebasable:
                        hops += 1
                        entry = renumber(entry, moved[0], base, moved[1])
                    else:
                        entry = moved[0]
                    base = moved[1]
                    generation = entry["generation"]
                    why = log_module.entry_problem(entry, generation)
                    if why is not None:
                        raise InvalidInputError(f"{op} staged a generation the log would "
                                                f"refuse ({why}); nothing was written")
                    self._delta.before_link(generation)
                    won = self._log.try_commit(entry)
            except BaseException:
                if pool is not None:  # no thread may create a file after the cleanup
                    concurrent.futures.wait(pending)
                    pool.shutdown()
                for path in written:
                    path.unlink(missing_ok=True)
                raise
            if not won:
                if kept is None:
                    for path in written:
                        path.unlink(missing_ok=True)
                else:  # kept for the next attempt: linked as they are if it stages the same
                    kept.extend(fresh)
                    commit.discard_flushed()  # a next attempt writes them again
                return False
            if kept is not None:  # files of lost attempts this one did not link
                for k in kept:
                    if not any(k is r for r in reused):
                        k.path.unlink(missing_ok=True)
                kept.clear()
            self._snap = base.apply(entry)
            # Delta versions only after the generation landed, still under the shared lock
            # so a vacuum never prunes a Delta log while this writer extends it
            self._delta.after_land(entry, self._snap)
        self._indexes.learn_own(base, generation, commit.frames,
                                commit.flushed_tables)
        if generation % 100 == 0:
            with contextlib.suppress(OSError):
                self._log.write_checkpoint(self._snap)
        return True

    def _contents_taken(self, commit: capture.Commit, snap: Snapshot) -> bool:
        """Whether a capsule stored at ``snap`` holds a content ``commit`` adds as new
        (then staging after it would answer that capsule's id: a true conflict). The
        lookup reads the winners' new capsules, as this handle's next lookup would; a
        read that fails counts as a conflict (staging again reports it properly)."""
        hashes = pl.concat([f["source_hash"] for f in commit.frames["capsules"]])
        try:
            self._indexes.refresh(snap)
            return bool(self._indexes.capsules_for_hashes(hashes).is_not_null().any())
        except (OSError, MemframeError, pl.exceptions.PolarsError):
            return True

    def history(self) -> pl.DataFrame:
        """One row per generation of the log: ``generation``, ``operation``, ``verbs``,
        ``committed_at`` (UTC) and the ``seq`` range it wrote (``seq_first``, ``seq_last``;
        null when it wrote no canonical row).

        Examples:
            >>> import memframe as mf, tempfile, os
            >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
            >>> _ = store.session_start("p")
            >>> store.history().select("generation", "operation").rows()
            [(1, 'session_start')]
        """
        rows = []
        for g in range(1, self.generation + 1):
            entry = self._log.read_entry(g)
            seq = entry.get("seq") or [None, None]
            rows.append({"generation": entry.get("generation"),
                         "operation": entry.get("operation"),
                         "verbs": list(entry.get("verbs") or []),
                         "committed_at": entry.get("timestamp"),
                         "seq_first": seq[0], "seq_last": seq[1]})
        schema = {"generation": pl.Int64(), "operation": pl.String(),
                  "verbs": pl.List(pl.String), "committed_at": pl.String(),
                  "seq_first": pl.Int64(), "seq_last": pl.Int64()}
        return pl.DataFrame(rows, schema=schema, orient="row" if not rows else None).with_columns(
            pl.col("committed_at").str.to_datetime("%Y-%m-%dT%H:%M:%S%.fZ", time_unit="ns",
                                                   time_zone="UTC"))

    # -- verbs ----------------------------------------------------------------------------
    def ingest(self, rows: Any) -> list[str]:
        """Write capsules; return their ids in input order.

        ``rows`` is a dict, a list of dicts or a DataFrame with ``content``, ``source`` and
        ``anchor`` (mandatory) and optionally project_id (default "default"), kind,
        confidence (0..1, default 0.6), created_at (default: the clock), valid_from,
        valid_to, authority_class, instruction_taint, conversation_id, author.
        Content already stored (same sha256) returns the existing id and writes nothing.
        """
        def ingest(c: capture.Commit) -> list[str]:
            # new capsules that lost to a commit adding none (an erasure, the cycle) are
            # renumbered past it instead of staged again (`Commit.appends_fresh`); past
            # another writer's new capsules, their ids move too, and the ids returned
            # with them (`Commit.moves_past_capsules`)
            c.allow_rebase(lambda ids, _g: [c.moved_id(i) for i in ids], moves_ids=True)
            return capture.ingest(c, rows)

        return self.commit(ingest, operation="ingest")

    def relate(self, from_id: str, to_id: str, kind: str) -> None:
        """Record a typed edge; re-relating the same (kind, from, to) is a no-op."""
        self.commit(lambda c: capture.relate(c, from_id, to_id, kind), operation="relate")

    def forget(self, capsule_id: str, mode: str = "tombstone", reason: str | None = None) -> None:
        """Tombstone a capsule; ``redact``/``purge`` also erase its content bytes."""
        def forget(c: capture.Commit) -> bool:
            # an erasure beaten by commits that only appended renumbers its forgets and
            # journal rows past theirs and links, its rewrites kept (`Commit.renumberable`)
            c.allow_rebase()
            return capture.forget(c, capsule_id, mode, reason)

        with self._rewriting() if mode in ("redact", "purge") else contextlib.nullcontext():
            self.commit(forget, operation="forget")

    def record_recall(self, capsule_ids: Sequence[str] | str, *,
                      terms: Sequence[str] | str | None = None,
                      project_prefix: str | None = None, session_id: str | None = None) -> None:
        """Record that these capsules were returned by a recall (usage).

        With ``terms`` (the caller's query text, kept verbatim) the recall also gets a
        receipt in ``recall_receipts``: its terms, the ids returned in order (none: a recall
        that answered nothing), the project prefix and the session it ran under, and its
        instant. Receipts are telemetry, as in nMEMORY 0.3.0: no journal row.

        Examples:
            >>> import memframe as mf, tempfile, os
            >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
            >>> a = store.ingest({"content": "deploys run on fridays", "source": "s", "anchor": "a"})[0]
            >>> store.record_recall([a], terms=["deploy day"])
            >>> store.record_recall([], terms=["rollback"])
            >>> store.table("recall_receipts").select("id", "outcome").collect().rows()
            [('rcpt-1', 'grounded'), ('rcpt-2', 'abstain')]
        """
        self.commit(lambda c: capture.record_recall(
            c, capsule_ids, terms=terms, project_prefix=project_prefix, session_id=session_id),
            operation="record_recall")

    def record_miss(self, terms: Sequence[str] | str, outcome: str) -> list[str]:
        """Record missed recall terms (folded per reference 4.7); returns the folded terms."""
        return self.commit(lambda c: capture.record_miss(c, terms, outcome), operation="record_miss")

    def teach_alias(self, term: str, alias: str) -> bool:
        """Teach recall a synonym (nMEMORY's ``memory_alias``): a query for ``term`` also
        searches ``alias``, one way only (teach the reverse pair for the other way).

        Both are folded as miss terms are (trimmed, lowercased, Latin accents folded:
        `memframe.text.fold_term`) and stored in ``recall_aliases``; an empty side, or an
        alias that folds to the term, is refused and nothing is written. Teaching a pair
        the store holds already writes nothing (the first instant stays) and returns False;
        a new pair returns True and gets one journal row, ``memory_alias`` naming the term
        with the reason ``alias=<alias>``, both as given.

        Examples:
            >>> import memframe as mf, tempfile, os
            >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
            >>> store.teach_alias("Configuração", "config")
            True
            >>> store.teach_alias("configuracao", "CONFIG")
            False
            >>> store.table("recall_aliases").select("term", "alias").collect().rows()
            [('configuracao', 'config')]
        """
        return self.commit(lambda c: capture.teach_alias(c, term, alias),
                           operation="teach_alias")

    def record_lane_override(self, forced: str, auto_pick: str) -> None:
        """Record an explicit recall lane that disagreed with auto routing."""
        self.commit(lambda c: capture.record_lane_override(c, forced, auto_pick),
                    operation="record_lane_override")

    def classify(self, capsule_id: str, kind: str | None = None, tier: str | None = None) -> None:
        """Label a capsule's kind and/or move its tier."""
        self.commit(lambda c: capture.classify(c, capsule_id, kind, tier), operation="classify")

    def session_start(self, project: str = capture.DEFAULT_PROJECT,
                      session_id: str | None = None) -> str:
        """Open a session bracket; returns ``sess-<n>``."""
        return self.commit(lambda c: capture.session_start(c, project, session_id),
                           operation="session_start")

    def session_finish(self, sid: str, handoff: str | None = None) -> str | None:
        """Close a session; a handoff becomes a capsule (source ``memory_session_finish``)."""
        return self.commit(lambda c: capture.session_finish(c, sid, handoff), operation="session_finish")

    def record_git_scan(self, source_key: str, cursor: str,
                        corroborations: Sequence[Mapping[str, Any]] = ()) -> None:
        """Advance a git source's cursor and record the scan's corroborations."""
        self.commit(lambda c: capture.record_git_scan(c, source_key, cursor, corroborations),
                    operation="record_git_scan")

    def review(self, capsule_id: str, verdict: str, reason: str | None = None) -> None:
        """Record a review verdict: ``proposed``, ``ratified`` or ``rejected``.

        A capsule whose latest verdict is not ``ratified`` is staged (reference 2.1): the
        digest counts it only under ``staged`` and leaves it out of every capsule section.

        Examples:
            >>> import memframe as mf, tempfile, os
            >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
            >>> (cid,) = store.ingest({"content": "draft", "source": "s", "anchor": "a"})
            >>> store.review(cid, "proposed")
            >>> mf.digest(store).to_dict()["staged"]
            {'proposed': 1, 'stale_proposals': 0}
            >>> store.review(cid, "ratified", reason="checked")
            >>> "staged" in mf.digest(store).to_dict()
            False
        """
        self.commit(lambda c: capture.review(c, capsule_id, verdict, reason), operation="review")

    def pin(self, capsule_id: str, pinned: bool = True, reason: str | None = None) -> None:
        """Pin (or, with ``pinned=False``, unpin) a capsule; the latest pin row decides.

        Examples:
            >>> import memframe as mf, tempfile, os
            >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
            >>> (cid,) = store.ingest({"content": "keep", "source": "s", "anchor": "a"})
            >>> store.pin(cid, reason="load-bearing")
            >>> mf.digest(store).to_dict()["pinned_total"]
            1
        """
        self.commit(lambda c: capture.pin(c, capsule_id, pinned, reason), operation="pin")

    def append(self, table: str, rows: Any) -> int:
        """Append many event rows of one table in one commit (the verbs, vectorised).

        ``table`` is one of relations, forgets, recalls, classifications, tiers,
        recall_misses, lane_overrides, corroborations, source_cursors, summaries, reviews,
        pins, recall_receipts, event_times, epistemics, recall_aliases. The rows follow the
        verbs' rules, declared once per table in ``memframe.schema.RULES`` (the verbs
        themselves stage their one row through the same path): capsule references must
        exist, vocabularies are closed, stored edges and taught aliases are skipped, audited
        tables get their journal rows. Returns the number of rows written.

        Examples:
            >>> import memframe as mf, tempfile, os
            >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
            >>> a, b, c = store.ingest([{"content": t, "source": "s", "anchor": t} for t in "abc"])
            >>> store.append("relations", {"kind": ["blocks", "blocks"], "from_id": [a, b],
            ...                            "to_id": [b, c]})
            2
        """
        return self.commit(lambda c: capture.append_events(c, table, rows),
                           operation=f"append:{table}")

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

    # -- Delta Lake ----------------------------------------------------------------------
    def sync_delta_logs(self, *, rebuild: bool = False) -> dict[str, Any]:
        """Keep every canonical table readable as a Delta Lake table, and catch up now.

        The first call on a store starts its Delta logs: version 0 of each table
        (``<store>/<table>/_delta_log/``) is the table at the newest generation. From then
        on every commit, by any handle, writes the Delta versions of the tables it
        touched right after its generation lands. A writer that died in between leaves
        them behind; the next commit, or this call, writes what is missing, checks that
        no Delta version names a file vacuum removed, and returns what it wrote.

        Returns:
            ``generation`` (mirrored through), ``versions`` ({table: versions written})
            and ``tables`` ({table: {"version", "generation"}}: each table's newest Delta
            version and the generation it mirrors).

        Examples:
            >>> import memframe as mf, tempfile, os
            >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
            >>> _ = store.ingest({"content": "x", "source": "s", "anchor": "a"})
            >>> store.sync_delta_logs()["tables"]["capsules"]
            {'version': 0, 'generation': 1}
            >>> _ = store.ingest({"content": "y", "source": "s", "anchor": "b"})
            >>> store.delta_logs_status()["tables"]["capsules"]
            {'version': 1, 'generation': 2}

        With ``rebuild=True`` (``memframe delta sync --rebuild``) every table's Delta log
        is discarded and started again at the newest generation: the recovery when the
        Delta logs are ahead of ``_log/`` (`DeltaLogsAheadError`), hold a file that is not
        a Delta commit, or a ``_delta_log`` was planted as a link. It holds the commit
        lock exclusively, waiting up to 30 s for commits in flight.
        """
        if not isinstance(rebuild, bool):
            raise InvalidInputError(f"rebuild is True or False; got {rebuild!r:.40}")
        lock = self._log.exclusive(30.0) if rebuild else self._log.writing()
        with self._lock, log_module.storage_errors(self.path, "writing Delta logs"), lock:
            snap = self._refresh()
            report = self._delta.rebuild(snap) if rebuild else self._delta.enable(snap)
            return {**report, "tables": self._delta.status(snap.generation)["tables"]}

    def delta_logs_status(self) -> dict[str, Any]:
        """Whether this store keeps Delta logs (``enabled``), the generation they are
        mirrored through (``synced_through``), the newest ``generation``, and per table
        its newest Delta version and the generation it mirrors (None: no Delta log)."""
        return self._delta.status(self._refresh().generation)

    # -- maintenance ----------------------------------------------------------------------
    def vacuum(self, *, retention_hours: float = DEFAULT_RETENTION_HOURS,
               allow_short_retention: bool = False, dry_run: bool = False,
               grace_seconds: float = 60.0, wait_seconds: float = 30.0) -> dict[str, Any]:
        """Remove memframe's own files that no generation in the retention window needs.

        Time travel (``store.at(g)``, ``store.as_of(t)``, ``--as-of``) keeps working for
        every instant of the last ``retention_hours`` (default 168, seven days, as Delta
        Lake's VACUUM): the files of every generation committed in that window, and of
        the one current at its start, stay. Older generations lose the files a later
        compaction, rebuild or erasure replaced. A shorter retention also ends time travel
        for readers still working on an older generation, so it is refused unless
        ``allow_short_retention=True`` says so (``retention_hours=0`` keeps only the
        newest generation). An erasure (``forget`` with ``redact``/``purge``) is never
        kept by the window: the bytes someone asked to erase do not outlive a vacuum, so
        generations before the newest erasure stop being readable.

        Only partition files (``part-<generation>-<n>-<token>.parquet``) and temporary files
        (``.tmp-<token>``) inside the store's own table directories (the canonical tables,
        ``projections/`` and ``derived/``) and ``_log/`` are candidates: anything else under
        the store root (your ``exports/mine.parquet``, a store nested inside) is never
        touched, and symbolic links are not followed. Which files generations name is read
        from the log itself (every generation file, no checkpoint), since this is the one
        operation that deletes.

        Files some generation named and a later one replaced are removed without
        stopping the writers (no commit links them again). To remove a file no generation
        names, vacuum holds the commit lock exclusively, so the files of a commit in
        flight are never removed; it waits up to ``wait_seconds`` for running commits.
        Temporary files, and partitions written for a generation that does not exist yet,
        are removed only once older than ``grace_seconds``.

        Args:
            retention_hours: how far back time travel must keep working (hours, >= 0).
            allow_short_retention: required for a retention shorter than the default.
            dry_run: remove nothing; report what would go.
            grace_seconds: the age below which an uncommitted file may be a live writer's.
            wait_seconds: how long to wait for commits in flight.

        Returns:
            ``partitions`` and ``temporary``: files removed (or that would be, on a dry
            run); ``files``: their paths, relative to the store; ``bytes``: their total
            size (freed, or that would be); ``readable``: the
            generations readable afterwards, ``[first, newest]`` (``[]`` for an empty
            store); ``no_longer_readable``: ``[first, last]`` generations this vacuum
            ends (None when it ends none); ``retention_hours`` and ``dry_run`` as given.

        Examples:
            >>> import memframe as mf, tempfile, os
            >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
            >>> for t in "ab":
            ...     _ = store.ingest({"content": t, "source": "s", "anchor": t})
            >>> _ = store.compact("capsules")
            >>> report = store.vacuum()  # the default window keeps generations 1 and 2
            >>> report["partitions"], report["readable"]
            (0, [1, 3])
            >>> plan = store.vacuum(retention_hours=0, allow_short_retention=True, dry_run=True)
            >>> plan["partitions"], plan["no_longer_readable"], plan["readable"]
            (2, [1, 2], [3, 3])
        """
        _check_vacuum_args(retention_hours, allow_short_retention, dry_run,
                           grace_seconds, wait_seconds)
        lock_file = self._log.log_dir / log_module.LOCK_FILE
        # a dry run removes nothing: on a store it may not write (a read-only mount) it
        # reads without the lock
        lock = (contextlib.nullcontext() if dry_run and not os.access(lock_file, os.W_OK)
                else self._log.exclusive(wait_seconds) if dry_run
                else self._ticketed_exclusive(wait_seconds))
        # A survey without the lock first: a vacuum that has nothing to remove (the
        # common case under the default window) never stops the writers. Taking the lock
        # cannot make a file removable that was not (what is present and named only
        # moves on), so an empty survey stands; a non-empty one is surveyed again under it.
        # (A store memframe may not write is refused as a vacuum, not answered.)
        # Nor does one that removes only files some generation named and a later one
        # replaced: the lock keeps the files of a commit in flight, which no generation
        # names yet, and no commit links a file it did not write; a reader or a writer
        # staging on an older generation reads them without the lock either way, and runs
        # again on the newer one when one is gone (under the lock as well).
        # (A push copies such files: while one runs, the vacuum takes the lock.)
        free = (None if dry_run or not os.access(lock_file, os.W_OK)
                or self._delta.synced_through() is not None else self._log.no_push())
        if free is not None:
            try:
                with self._lock, log_module.storage_errors(self.path, "vacuum"):
                    snap, doomed, sizes, before, after, replaced = self._vacuum_survey(
                        retention_hours, grace_seconds)
                    if replaced:
                        for full, _rel, _kind in doomed:
                            full.unlink(missing_ok=True)
            finally:
                self._log.release_ticket(free)
            if replaced:
                return _vacuum_report(snap, doomed, sizes, before, after, dry_run=dry_run,
                                      retention_hours=retention_hours)
        with self._lock, log_module.storage_errors(self.path, "vacuum"), lock:
            snap, doomed, sizes, before, after, _replaced = self._vacuum_survey(
                retention_hours, grace_seconds)
            for full, _rel, _kind in doomed:
                if not dry_run:
                    full.unlink(missing_ok=True)
            if not dry_run and self._delta.synced_through() is not None:
                # Delta readers open no version naming a removed file: catch the logs up,
                # then checkpoint each at its first version that names none (older go)
                self._delta.sync(snap, prune=True)
            return _vacuum_report(snap, doomed, sizes, before, after, dry_run=dry_run,
                                  retention_hours=retention_hours)

    def _vacuum_survey(self, retention_hours: float, grace_seconds: float
                       ) -> tuple[Snapshot, list[tuple[Path, str, str]], dict[str, int],
                                  int | None, int | None, bool]:
        """What a vacuum at the newest generation removes: the snapshot, the doomed files
        (path, store-relative path, kind), the size of every owned file not kept, the
        first generation readable before and after, and whether every doomed file is one
        a generation named and a later one removed (True when none is doomed)."""
        snap = self._refresh()
        history = self._log.lifetimes(snap.generation)
        alive = {path for path, (_, gone) in history.paths.items() if gone is None}
        if alive != {p.path for parts in snap.tables.values() for p in parts}:
            raise CorruptStoreError(
                f"a checkpoint of {self.path} disagrees with the log at generation "
                f"{snap.generation}; nothing was removed. Delete the _log/_checkpoint.* "
                f"files (the log alone is authoritative) and run vacuum again"
            )
        window_start = _commit_stamp(
            self.now() - datetime.timedelta(hours=float(retention_hours)))
        first_kept = max(history.current_at(window_start), history.last_erasure, 1)
        keep = {path for path, (_, gone) in history.paths.items()
                if gone is None or gone > first_kept}
        cutoff = time.time() - grace_seconds
        doomed: list[tuple[Path, str, str]] = []
        present: set[str] = set()
        sizes: dict[str, int] = {}
        for entry, rel, kind in _owned_files(self._log.root):
            if kind == "partition" and rel in keep:
                present.add(rel)  # kept: neither its age nor its size matters (no stat
                continue          # for the thousands a stream of commits leaves)
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            mtime, sizes[rel] = st.st_mtime, st.st_size
            if kind == "partition":
                present.add(rel)
            if kind == "temporary":
                if mtime < cutoff:
                    doomed.append((Path(entry.path), rel, kind))
            elif rel not in keep:
                if _part_generation(entry.name) > snap.generation and mtime >= cutoff:
                    continue  # a writer that has not linked yet (it holds no lock: crashed)
                doomed.append((Path(entry.path), rel, kind))
        gone_now = {rel for _, rel, kind in doomed if kind == "partition"}
        replaced = all(history.paths.get(rel, (0, None))[1] is not None
                       for _, rel, _kind in doomed)
        return (snap, doomed, sizes, history.readable_from(present),
                history.readable_from(present - gone_now), replaced)

    @contextlib.contextmanager
    def _ticketed_exclusive(self, wait_seconds: float) -> Iterator[None]:
        """The commit lock held exclusively, taken behind the fairness ticket: new commits
        wait at the ticket while the ones in flight finish, so a stream of small commits
        cannot keep the lock shared for ever."""
        ticket = self._log.take_ticket(min(wait_seconds, log_module.TICKET_WAIT_SECONDS))
        try:
            with self._log.exclusive(wait_seconds):
                yield
        finally:
            self._log.release_ticket(ticket)

    def compact(self, table: str | None = None, *, min_rows: int = 65_536) -> dict[str, int]:
        """Merge runs of small partitions of a table, changing no row.

        A partition is small below ``min_rows`` rows, or below the most a partition of its
        table holds (`memframe.store.tables.part_rows`: 16,384 rows for ``capsules``, whose
        partitions an erasure rewrites whole). A run of consecutive small partitions (in
        seq order, so a table's partitions keep disjoint seq ranges) becomes as few
        partitions as that bound allows. Returns merged-partition counts per table.

        Examples:
            >>> import memframe as mf, tempfile, os
            >>> store = mf.Store.create(os.path.join(tempfile.mkdtemp(), "s"))
            >>> for t in "ab":
            ...     _ = store.ingest({"content": t, "source": "s", "anchor": t})
            >>> store.compact("capsules")
            {'capsules': 2}
        """
        names = [table] if table is not None else list(S.CANONICAL_TABLES)
        for name in names:
            if name not in S.CANONICAL_TABLES:
                raise InvalidInputError(
                    f"unknown table {name!r}; compact one of: {', '.join(S.CANONICAL_TABLES)}"
                )
        if not isinstance(min_rows, int) or isinstance(min_rows, bool) or min_rows < 1:
            raise InvalidInputError(f"min_rows={min_rows!r}: give a positive row count")

        def merge(w: capture.Commit) -> dict[str, int]:
            merged = _merge_small_runs(w, {n: w.snapshot.parts(n) for n in names}, min_rows)
            w.allow_rebase()  # the merged parts are the same rows whatever is appended
            return merged

        with self._rewriting():
            return self.commit(merge, operation="compact")

    def _compact_tail(self, least: int | None = None) -> dict[str, int]:
        """Merge each canonical table's newest small partitions when they are many, as
        `compact` merges them; the cycle runs it first. Returns merged-partition counts
        per table.

        A stream of single-row commits leaves a partition per commit and table, and every
        later cycle and digest stats, lists and confirms each of them. Per table the run
        merged is the longest one of the newest parts below a tier's bound (16, 256,
        4,096, then 65,536 rows; the smallest bound first) that holds at least ``least``
        parts (`AUTO_COMPACT_PARTS`, 16), so a row is merged again about once per tier and
        a table keeps a few dozen small parts, whatever the commits. The kept states
        follow: the digest state's seal is taken again over the new files in the same
        commit, and the journal check walks from the last verified part before them.
        Nothing inside a transaction (its cycle reads the generation it is pinned to).
        """
        least = AUTO_COMPACT_PARTS if least is None else least
        if self._tx is not None:
            return {}

        def runs(snap: Snapshot) -> dict[str, list[Part]]:
            found = {name: _tail_run(snap.parts(name), tables.part_rows(name), least)
                     for name in S.CANONICAL_TABLES}
            return {name: run for name, run in found.items() if run}

        def merge(w: capture.Commit) -> dict[str, int]:
            merged = _merge_small_runs(w, runs(w.snapshot), tables.PART_ROWS,
                                       most_rows=AUTO_COMPACT_ROWS)
            w.allow_rebase()  # the merged parts are the same rows whatever is appended
            return merged

        if not runs(self.pinned().snapshot):
            return {}  # the common case: read from the pinned snapshot, no commit
        with self._rewriting():
            return self.commit(merge, operation="auto_compact")

    def discard_if_unused(self, *, remove_root: bool) -> bool:
        """Remove this store if no generation was ever committed to it (undo a create).

        Only what `Store.create` made is removed (the format marker, the log directory and
        empty table directories), and only while the log is empty, checked under the
        exclusive commit lock: a store another process has committed to is left alone.
        ``remove_root`` also removes the (then empty) store directory. Returns whether the
        store was removed.
        """
        with self._lock, log_module.storage_errors(self.path, "removing an unused store"), \
                self._log.exclusive(0.0):
            if self._log.latest_generation() != 0:
                return False
            self._delta.discard()
            return self._log.discard(remove_root=remove_root)


#: a run of this many of a table's newest parts below a tier's bound is merged by the
#: cycle (`Store._compact_tail`)
AUTO_COMPACT_PARTS = 16
#: the tiers' bounds (rows), each 16 times the one before
AUTO_COMPACT_TIERS = (16, 256, 4_096, 65_536)
#: rows one such merge stages at most (a store written row by row and never cycled merges
#: over several cycles, holding a bounded commit each time)
AUTO_COMPACT_ROWS = 262_144


def _tail_run(parts: Sequence[Part], cap: int, least: int) -> list[Part]:
    """The run of ``parts`` (in seq order) the cycle merges: per tier, the smallest first,
    the newest consecutive parts whose rows fall in that tier (at least the bound before
    it, below its own; newer parts of lower tiers passed over), when they are at least
    ``least``; [] when no tier below ``cap`` (the most a part holds) has that many. A
    merge of ``least`` parts of one tier makes a part of the next (the bounds grow by 16),
    so each row is merged again about once per tier.

    Examples:
        >>> from memframe.store.log import Part
        >>> def parts(*rows):
        ...     return [Part(f"t/{i}", n, i, i) for i, n in enumerate(rows)]
        >>> [p.rows for p in _tail_run(parts(9000, 300, 20, 1, 1, 1), 16_384, 3)]
        [1, 1, 1]
        >>> [p.rows for p in _tail_run(parts(9000, 30, 20, 16, 1, 1), 16_384, 3)]
        [30, 20, 16]
        >>> _tail_run(parts(9000, 300, 20, 16, 1, 1), 16_384, 3)  # 2 of each: no tier
        []
    """
    lower = 0
    for bound in AUTO_COMPACT_TIERS:
        if bound > cap:
            break
        run: list[Part] = []
        for part in reversed(parts):
            if part.rows < lower and not run:
                continue  # a newer part of a lower tier
            if not lower <= part.rows < bound:
                break
            run.append(part)
        if len(run) >= least:
            return run[::-1]
        lower = bound
    return []


def _merge_small_runs(w: capture.Commit, parts: Mapping[str, Sequence[Part]], min_rows: int,
                      *, most_rows: int | None = None) -> dict[str, int]:
    """Stage, per table, the merge of every run of consecutive small ``parts`` (below
    ``min_rows`` or the table's `tables.part_rows`; in seq order, so merged parts keep
    disjoint seq ranges) into as few as that bound allows, runs only until ``most_rows``
    rows are staged (the commit holds them). Returns merged-partition counts per table."""
    merged: dict[str, int] = {}
    staged = 0
    view = w.view
    for name, candidates in parts.items():
        cap = tables.part_rows(name)
        small = min(min_rows, cap)

        def merge_run(run: list[Part], name: str = name) -> None:
            nonlocal staged
            if len(run) > 1 and (most_rows is None or staged < most_rows):
                staged += sum(p.rows for p in run)
                # one parse for the run (~0.06 ms a one-row part, ~0.7 ms each alone); a
                # part a vacuum removed meanwhile runs the commit again on the newer one
                w.replace_parts(name, run, view.read_partitions(name, run))
                merged[name] = merged.get(name, 0) + len(run)

        run: list[Part] = []
        total = 0  # the run's rows
        for part in candidates:
            if part.rows < small and total + part.rows <= cap:
                run.append(part)
                total += part.rows
                continue
            merge_run(run)
            # a small part that would overflow the run starts the next one
            run, total = ([part], part.rows) if part.rows < small else ([], 0)
        merge_run(run)
    return merged


def _check_vacuum_args(retention_hours: Any, allow_short: Any, dry_run: Any,
                       grace_seconds: Any, wait_seconds: Any) -> None:
    """Refuse vacuum arguments that protect nothing or say something unintended."""
    if (not isinstance(grace_seconds, int | float) or isinstance(grace_seconds, bool)
            or not grace_seconds > 0 or grace_seconds == float("inf")):
        raise InvalidInputError(
            f"grace_seconds={grace_seconds!r}: give a positive number of seconds (default "
            f"60); it protects files a slow writer is still writing, so 0, negative, NaN "
            f"and infinite values are refused"
        )
    if not isinstance(wait_seconds, int | float) or not wait_seconds >= 0:
        raise InvalidInputError(f"wait_seconds={wait_seconds!r}: give seconds >= 0")
    for name, flag in (("allow_short_retention", allow_short), ("dry_run", dry_run)):
        if not isinstance(flag, bool):
            raise InvalidInputError(f"{name} is True or False; got {flag!r:.40}")
    if (not isinstance(retention_hours, int | float) or isinstance(retention_hours, bool)
            or not 0 <= retention_hours <= 24 * 365 * 200):
        raise InvalidInputError(
            f"retention_hours={retention_hours!r:.40}: give the hours of history time travel "
            f"must keep reaching, a number >= 0 (default {DEFAULT_RETENTION_HOURS:g}, seven days)"
        )
    if retention_hours < DEFAULT_RETENTION_HOURS and not allow_short:
        raise InvalidInputError(
            f"retention_hours={retention_hours:g} is shorter than the default "
            f"{DEFAULT_RETENTION_HOURS:g} (seven days): it ends time travel to older "
            f"generations and can pull files from under a reader still working on one. "
            f"Nothing was removed. If that is what you want, say so with "
            f"allow_short_retention=True (CLI: --allow-short-retention); --dry-run shows "
            f"what would go"
        )


def _not_unicode(exc: UnicodeEncodeError) -> InvalidInputError:
    text = exc.object if isinstance(exc.object, str) else ""
    near = text[max(0, exc.start - 20):exc.start]
    return InvalidInputError(
        f"text is not valid Unicode: {exc.reason} at position {exc.start} (after {near!r}); "
        f"a lone surrogate usually comes from decoding bytes with errors='surrogateescape': "
        f"decode as UTF-8 with errors='replace', or drop the character. Nothing was written"
    )


class RemoteStore(Store):
    """A store on object storage, opened with ``Store.open("s3://...")``.

    Every read works as on a local store (tables, ``capsule_state``, ``at`` / ``as_of``,
    ``diff``, the digest, the doors and the audits): each pinned generation is fetched
    whole into a local mirror before it is read (in parallel, and kept, so the next
    generation fetches only its new files). The handle follows the newest generation as a
    local handle does, at the cost of one request per call when nothing is new.
    `io_counts` says what it cost. The verbs are refused: a remote copy changes only by
    `Store.push` from the store it copies.
    """

    _log: MirrorLog

    def __init__(self, log: MirrorLog, clock: Clock | None = None, actor: str = "memframe"):
        super().__init__(log, clock, actor)
        log.prune(self._snap)  # files only older generations named (erased rows among them)

    @property
    def url(self) -> str:
        """The store's URL."""
        return self._log.url

    def _refuse(self, *_: Any, **__: Any) -> Any:
        raise ReadOnlyStoreError(
            f"{self.url} is a store on object storage, which memframe reads but does not "
            f"change: make the change in the store it was pushed from, then publish it again "
            f"with `memframe push STORE {self.url}` (store.push(url))")

    def commit(self, fn: Callable[[capture.Commit], Any], *, operation: str) -> Any:
        return self._refuse()

    ingest = relate = forget = record_recall = record_miss = record_lane_override = _refuse
    classify = session_start = session_finish = record_git_scan = transaction = _refuse
    append = compact = vacuum = review = pin = teach_alias = sync_delta_logs = _refuse
    discard_if_unused = push = _compact_tail = _refuse  # (refused before any fetch)

    def read(self, fn: Callable[[StoreView], Any]) -> Any:
        try:
            return super().read(fn)
        except MemframeError as exc:
            # a message about the mirror's files is about the remote store's
            text = str(exc)
            if str(self.path) not in text or len(exc.args) != 1:
                raise
            exc.args = (text.replace(f"`memframe info {self.path}`", f"`memframe info "
                                     f"{self.url}`").replace(str(self.path), self.url),)
            raise

    def history(self) -> pl.DataFrame:
        self._log._prefetch(1, self.generation)  # every generation file, in parallel
        return super().history()

    def __repr__(self) -> str:
        return super().__repr__().replace(repr(str(self.path)), repr(self.url), 1)


@dataclasses.dataclass(eq=False)
class _Kept:
    """A partition file a lost attempt wrote: linked by a later attempt of the same commit
    that stages the very same rows for the same table (a rebase), else removed."""

    path: Path
    table: str
    frame: pl.DataFrame
    kwargs: dict[str, Any]
    add: dict[str, Any]


def _reusable(kept: list[_Kept] | None, reused: list[_Kept], table: str, frame: pl.DataFrame,
              kwargs: dict[str, Any]) -> _Kept | None:
    """A kept file holding exactly ``frame`` for ``table`` (still there: the caller holds
    the shared commit lock, so no vacuum removes it before the link), or None."""
    if not kept:
        return None
    for k in kept:
        if (k.table == table and k.kwargs == kwargs and not any(k is r for r in reused)
                and k.frame.height == frame.height and k.frame.schema == frame.schema
                and k.path.exists() and k.frame.equals(frame)):
            return k
    return None


class _StaleSnapshot(ConcurrentCommitError):
    """A pinned file vanished (replaced, then vacuumed): run again on a newer generation.

    `Store.commit` retries on it; inside a transaction it reaches the caller as a
    `ConcurrentCommitError` (nothing was written: run the transaction again).
    """

    def __init__(self, path: str):
        super().__init__(f"{path} was replaced and vacuumed while this commit read it; nothing "
                         f"was written: run it again")


def _owned_files(root: Path) -> Iterator[tuple[os.DirEntry[str], str, str]]:
    """memframe's own partition and temporary files under a store (no symlink followed):
    each file's directory entry, its path relative to the store (``/``-separated) and its
    kind. (Strings, not paths: a vacuum under a stream of commits lists thousands.)"""
    dirs = [root / name for name in S.CANONICAL_TABLES]
    # a Delta version or checkpoint a crash left half written (only its temporary files)
    dirs += [root / name / "_delta_log" for name in S.CANONICAL_TABLES
             if not (root / name).is_symlink()]
    for top in ("projections", "derived"):
        base = root / top
        if base.is_dir() and not base.is_symlink():
            for dirpath, subdirs, _files in os.walk(base, followlinks=False):
                here = Path(dirpath)
                if (here / "memframe.json").exists() and here != root:
                    subdirs[:] = []  # a store nested inside: never ours to clean
                    continue
                dirs.append(here)
    for directory in [*dirs, root / log_module.LOG_DIR]:
        if directory.is_symlink() or not directory.is_dir():
            continue
        if (directory / "memframe.json").exists():
            continue
        head = directory.relative_to(root).as_posix() + "/"
        in_log = directory == root / log_module.LOG_DIR  # only temporaries there
        with os.scandir(directory) as found:
            for entry in found:
                if entry.is_dir(follow_symlinks=False):
                    continue
                if (not in_log and log_module.PART_NAME_RE.fullmatch(entry.name)
                        and not entry.is_symlink()):
                    yield entry, head + entry.name, "partition"
                elif log_module.TEMP_NAME_RE.match(entry.name):
                    yield entry, head + entry.name, "temporary"


def _part_generation(name: str) -> int:
    """The generation a partition file was written for (``part-<generation>-...``)."""
    try:
        return int(name.split("-")[1])
    except (IndexError, ValueError):
        return 0


def _bound(view: StoreView, point: Any, what: str) -> StoreView:
    """A diff bound (a generation number, an aware instant or a view) as a view of
    ``view``'s store."""
    if isinstance(point, StoreView):
        if point.path != view.path:
            raise InvalidInputError(f"{what} is a view of another store ({point.path}); "
                                    f"diff compares generations of one store")
        return point
    if isinstance(point, datetime.datetime):
        if point.tzinfo is None:
            raise InvalidInputError(f"{what} is a naive datetime; give it a time zone "
                                    f"(datetime(..., tzinfo=datetime.UTC))")
        return view.as_of(point)
    if isinstance(point, int) and not isinstance(point, bool):
        if not 0 <= point <= view.generation:
            raise InvalidInputError(f"{what}={point} is not a generation of this view "
                                    f"(0..{view.generation})")
        return view.at(point)
    raise InvalidInputError(f"{what} is a generation number, an aware datetime or a view "
                            f"(store.at(g)); got {point!r:.60}")


def _staged_by(fn: Callable[[capture.Commit], Any], commit: capture.Commit) -> Any:
    """``fn(commit)``; the partitions it wrote early (`Commit.flush`) are removed if it
    raises: no generation will name them."""
    try:
        return fn(commit)
    except BaseException:
        commit.discard_flushed()
        raise


class _Transaction:
    """Verbs staged on one commit; replayed against a newer generation if a writer wins."""

    def __init__(self, store: Store):
        self.store = store
        self.calls: list[Callable[[capture.Commit], Any]] = []
        self.results: list[Any] = []
        self.commit = store._new_commit(store._refresh())

    def run(self, fn: Callable[[capture.Commit], Any]) -> Any:
        try:
            result = fn(self.commit)
        except UnicodeEncodeError as exc:
            raise _not_unicode(exc) from None
        self.calls.append(fn)
        self.results.append(result)
        return result

    def land(self) -> None:
        """Land the staged verbs; a lost race replays them on the newer generation through
        the store's fair path (rebase of unchanged rewrites, the fairness ticket after
        repeated losses), as any commit."""
        if self.commit.empty:
            return
        store = self.store
        kept: list[_Kept] = []
        # the verbs' results are out already, for the generation after the pinned one
        self.commit.allow_rebase(None)
        try:
            if not store._land(self.commit, "transaction", kept):
                store._commit_fairly(self._replay, "transaction", {}, kept, lost=1)
        finally:
            for k in kept:  # files of lost attempts no generation names
                k.path.unlink(missing_ok=True)

    def _replay(self, commit: capture.Commit) -> list[Any]:
        replayed = [fn(commit) for fn in self.calls]
        commit.allow_rebase(None)  # (see land)
        if replayed != self.results:
            raise ConcurrentCommitError(
                "another writer committed during the transaction and its verbs now give "
                "different ids; nothing was written: run the transaction again"
            )
        return replayed


def _stage_erased_text(root: Path, commit: capture.Commit,
                       cache: dict[str, Any] | None = None) -> bool:
    """Stage, on a commit that erases content, every derived text table
    (`derived.TEXT_PREFIX`) that holds a row of an erased capsule again without those rows
    (`derived.without_erased`: order and row-group size kept, so its readers read it as
    before), or dropped whole when it cannot say whose text a row holds. The table's
    staged rows and its stored parts are filtered alike; its old parts leave with this
    commit, so once vacuumed no file holds the erased text, in values or in statistics.
    State another code wrote is dropped (`derived.settle` drops it all). False when a
    stored part is gone (replaced by a newer generation and vacuumed: the commit lost the
    race and runs again on the newer one). ``cache``: the commit's reads across its
    attempts (parts are immutable: a retry after a lost race reads none of them again)."""
    snap = commit.snapshot
    cache = {} if cache is None else cache

    def footer(path: str) -> Any:
        key = f"text-ranges:{path}"
        if key not in cache:
            cache[key] = tables.row_group_ranges(root / path, derived.TEXT_KEY)
        return cache[key]

    def stored(path: str) -> pl.DataFrame:
        key = f"text-rows:{path}"
        if key not in cache:
            cache[key] = pl.read_parquet(root / path)
        frame: pl.DataFrame = cache[key]
        return frame

    names = {t for t, parts in snap.tables.items() if parts and t.startswith(
        derived.TEXT_PREFIX)} | {t for t in commit.derived if t.startswith(derived.TEXT_PREFIX)}
    ours = derived.current(snap.watermarks)
    erased = sorted(commit.erased)
    for table in sorted(names):
        if not ours:
            commit.write_derived(table, pl.DataFrame(), replace=True)
            continue
        held, replace, group_rows = commit.derived.get(table, ([], False, None))
        parts = [] if replace else snap.parts(table)
        if any(not (root / p.path).exists() for p in parts):
            return False
        # a part whose footer rules every erased number out of its groups is not read,
        # unless the table is written again anyway
        ranges = [footer(p.path) for p in parts]
        staged = [f.collect() if isinstance(f, SpilledRows) else f  # (never spilled)
                  for f in held if f.height]
        if not any(_may_hold(erased, lo, hi) for _meta, mins, maxs, _n in ranges
                   for lo, hi in zip(mins, maxs, strict=True)) and all(
                derived.without_erased(f, erased) is f for f in staged):
            continue
        frames = [stored(p.path) for p in parts] + staged
        # written again in row groups of the size it had
        group_rows = group_rows or max((n for *_, counts in ranges for n in counts),
                                       default=0) or None
        kept = [derived.without_erased(f, erased) for f in frames]
        whole = [k for k in kept if k is not None]
        if len(whole) < len(kept):  # a frame kept whole names an erased capsule: dropped
            commit.write_derived(table, pl.DataFrame(), replace=True)
            continue
        if all(k.height == f.height for k, f in zip(whole, frames, strict=True)):
            continue  # holds no erased capsule's row: kept as it is
        rows = pl.concat(whole, how="vertical_relaxed")
        commit.write_derived(table, rows, replace=True, row_group_rows=group_rows)
    return True


def _may_hold(erased: list[int], lo: Any, hi: Any) -> bool:
    """Can a row group whose key runs from ``lo`` to ``hi`` (None: no statistics, or no
    such column) hold one of the ``erased`` numbers (sorted)?"""
    if lo is None or hi is None:
        return True
    i = bisect.bisect_left(erased, lo)
    return i < len(erased) and erased[i] <= hi


def _reseal(root: Path, snap: Snapshot, adds: list[tuple[int, dict[str, Any]]],
            removes: list[str], sealed: dict[str, Any]) -> dict[str, Any] | None:
    """The digest state's seal after a commit that rewrote canonical parts: taken over the
    parts the commit lands (its new files stat'ed now), when the seal held before it;
    None (no seal: the next cycle rebuilds the state) when it did not."""
    top = int(sealed.get("seq", -1))
    if fingerprint.canonical_seal(root, snap.tables, top) != sealed:
        return None
    after = snap.apply({"generation": snap.generation + 1,
                        "add": [add for _, add in adds], "remove": removes})
    return fingerprint.canonical_seal(root, after.tables, top)
